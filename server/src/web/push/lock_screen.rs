//! What a lock screen may show of a text (docs/NOTIFICATIONS.md, "What a
//! lock screen shows"): one line, no control or format characters, a few
//! words at most, and nothing that looks like a credential. Every text a
//! push carries is a [`Shown`], and [`shown`] is the only way to make one:
//! an agent's name, a tool's name (an ACP agent names its calls after their
//! command line), a command, a path, a question's title.
//!
//! The masker works on words (split at whitespace) and hides:
//! - the user info of a URL (`https://•••@github.com/…`);
//! - the value of a name that says it is a secret, written `NAME=value` or
//!   `name:value` anywhere in a word (`GH_TOKEN=…`, `?access_token=…`,
//!   `--password=…`, `{"password":"…"}`);
//! - the word after an option that names a secret (`--token X`), the
//!   password of `-u`/`--user user:password`, `-pPASSWORD` of the MySQL
//!   clients, `sshpass -p X`, `redis-cli -a X`;
//! - the credentials after a header that names one (`Authorization:`,
//!   `Cookie:`, `X-Api-Key:`) or after `Bearer` and `Basic`;
//! - words shaped like tokens: known prefixes (`ghp_`, `github_pat_`,
//!   `glpat-`, `sk-`, `xoxb-`, `AKIA…`, `AIza…`, `hf_`, `npm_`, JWTs) and
//!   any long run of letters and digits that changes between lower case,
//!   upper case and digits as often as random text does.
//!
//! It errs towards hiding: a commit hash or a UUID is masked too.

/// What stands for a hidden secret.
pub const MASK: &str = "•••";

/// A text fit for a lock screen; made only by [`shown`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown(String);

impl Shown {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Shown {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

/// `text` as a lock screen may show it: cleaned, then masked, then cut to
/// `limit` characters. Masked before it is cut, so that a cut cannot leave
/// half a secret that no longer looks like one.
pub fn shown(text: &str, limit: usize) -> Shown {
    Shown(clean(&mask_secrets(&clean(text, usize::MAX)), limit))
}

/// `text` on one line, without control or format characters, at most
/// `limit` characters (an ellipsis marks a cut).
fn clean(text: &str, limit: usize) -> String {
    let mut out = String::new();
    let mut count = 0;
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() || shard_protocol::diagnostic::unshown(c) {
            space = !out.is_empty();
            continue;
        }
        if count + usize::from(space) >= limit {
            out.push('…');
            return out;
        }
        if space {
            out.push(' ');
            count += 1;
            space = false;
        }
        out.push(c);
        count += 1;
    }
    out
}

/// What the words before said of the next one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Next {
    Any,
    /// A secret as a whole (`--token X`).
    Secret,
    /// `user:password`: the password is the secret (`-u admin:pw`).
    UserPassword,
    /// A header's credentials: a scheme (`Bearer`), then the secret; or
    /// the secret alone.
    Credentials,
}

/// Options that take a password, by program: the option, and whether its
/// value may also be the next word (for the MySQL clients a lone `-p`
/// asks for the password, and the next word is the database).
const PASSWORD_OPTIONS: &[(&str, &str, bool)] = &[
    ("mysql", "-p", false),
    ("mysqldump", "-p", false),
    ("mysqladmin", "-p", false),
    ("mysqlimport", "-p", false),
    ("mysqlshow", "-p", false),
    ("mysqlcheck", "-p", false),
    ("mariadb", "-p", false),
    ("mariadb-dump", "-p", false),
    ("sshpass", "-p", true),
    ("redis-cli", "-a", true),
];

/// Options whose value is `user[:password]`.
const USER_OPTIONS: &[&str] = &["-u", "--user", "--proxy-user"];

/// Authorization schemes, shown before the credentials in a header.
const SCHEMES: &[&str] = &["bearer", "basic", "token", "digest", "negotiate", "ntlm", "apikey"];

/// Words that run a program without being it.
const PREFIXES: &[&str] = &["sudo", "env", "exec", "nohup", "time", "command", "doas"];

/// A text with what looks like a secret replaced by [`MASK`].
pub fn mask_secrets(text: &str) -> String {
    let mut out = Vec::new();
    let mut next = Next::Any;
    // The program the current command runs, and whether the next word may
    // start a command.
    let mut program = String::new();
    let mut starts = true;
    for word in text.split_whitespace() {
        let bare = word.trim_matches(|c: char| matches!(c, '\'' | '"' | '`'));
        let lower = bare.to_ascii_lowercase();
        match std::mem::replace(&mut next, Next::Any) {
            Next::Secret => {
                out.push(MASK.to_owned());
                continue;
            }
            Next::UserPassword => {
                out.push(mask_word(&mask_password(word)));
                continue;
            }
            Next::Credentials => {
                if SCHEMES.contains(&lower.as_str()) && !word.ends_with(['\'', '"']) {
                    next = Next::Secret;
                }
                out.push(MASK.to_owned());
                continue;
            }
            Next::Any => {}
        }
        if starts && !bare.contains('=') && !PREFIXES.contains(&bare) {
            program = bare.rsplit('/').next().unwrap_or(bare).to_owned();
            starts = false;
        }
        if matches!(bare, "|" | "||" | "&&" | ";" | "&") || bare.ends_with([';', '|', '&', '(']) {
            starts = true;
        }
        out.push(option(word, bare, &lower, &program, &mut next));
    }
    out.join(" ")
}

/// One word, as an option that may say what the next word is, else as
/// text with secrets in it.
fn option(word: &str, bare: &str, lower: &str, program: &str, next: &mut Next) -> String {
    for (owner, flag, separate) in PASSWORD_OPTIONS {
        if program != *owner {
            continue;
        }
        if bare == *flag && *separate {
            *next = Next::Secret;
            return word.to_owned();
        }
        if bare.len() > flag.len() && bare.starts_with(flag) && !bare.starts_with("--") {
            return format!("{flag}{MASK}");
        }
    }
    if USER_OPTIONS.contains(&bare) {
        *next = Next::UserPassword;
        return word.to_owned();
    }
    if let Some(value) = bare.strip_prefix("-u").filter(|_| !bare.starts_with("--")) {
        return format!("-u{}", mask_password(value));
    }
    for flag in USER_OPTIONS.iter().filter(|flag| flag.starts_with("--")) {
        if let Some(value) = bare.strip_prefix(*flag).and_then(|rest| rest.strip_prefix('=')) {
            return format!("{flag}={}", mask_password(value));
        }
    }
    if bare.starts_with('-') && !bare.contains('=') && names_secret(bare) {
        *next = Next::Secret;
        return word.to_owned();
    }
    // A header whose value is a credential, its value in the next words.
    if let Some(name) = bare.strip_suffix(':')
        && !name.contains(':')
        && names_secret(name)
    {
        *next = Next::Credentials;
        return word.to_owned();
    }
    // `Authorization:Bearer`, `Authorization:'token abc'`: the credentials
    // follow in the next word.
    if let Some((name, value)) = bare.split_once(':')
        && names_secret(name)
        && SCHEMES.contains(&value.trim_matches(['\'', '"']).to_ascii_lowercase().as_str())
        && !word.ends_with(['\'', '"'])
    {
        *next = Next::Secret;
        return mask_word(word);
    }
    if matches!(lower, "bearer" | "basic") {
        *next = Next::Secret;
        return word.to_owned();
    }
    mask_word(word)
}

/// `user:password` with the password masked; a value without `:` is a
/// user name alone.
fn mask_password(value: &str) -> String {
    match value.split_once(':') {
        Some((user, password)) if !password.is_empty() => format!("{user}:{MASK}"),
        _ => value.to_owned(),
    }
}

/// Whether a name (of a variable, an option, a field, a header) says its
/// value is a secret.
fn names_secret(name: &str) -> bool {
    const WITHIN: [&str; 8] = [
        "token",
        "secret",
        "passw",
        "credential",
        "authorization",
        "cookie",
        "signature",
        "apikey",
    ];
    const WHOLE: [&str; 5] = ["pass", "pwd", "auth", "sig", "session"];
    name.to_ascii_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|part| !part.is_empty())
        .any(|part| {
            WITHIN.iter().any(|within| part.contains(within))
                || WHOLE.contains(&part)
                || part.ends_with("key")
                || part.ends_with("keys")
                || (part.ends_with("auth") && part != "author")
        })
}

/// A word's secrets: a URL's user info, secret-named values, tokens.
fn mask_word(word: &str) -> String {
    mask_tokens(&mask_assignments(&mask_user_info(word)))
}

/// `scheme://user:password@host` becomes `scheme://•••@host`.
fn mask_user_info(word: &str) -> String {
    let mut out = String::new();
    let mut rest = word;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let end = tail.find(['/', '?', '#', '\'', '"', '`']).unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(user) => {
                out.push_str(MASK);
                out.push_str(&authority[user..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// The value of each `name=value` or `name:value` in a word whose name
/// names a secret: `GH_TOKEN=•••`, `?access_token=•••&x=1`,
/// `{"password":"•••"}`.
fn mask_assignments(word: &str) -> String {
    let name_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    let mut out = String::new();
    let mut rest = word;
    while let Some(at) = rest.find(['=', ':']) {
        let (head, tail) = rest.split_at(at);
        let operator = &tail[..1];
        let after = &tail[1..];
        let name = head.trim_end_matches(['"', '\'']);
        let start = name.rfind(|c: char| !name_char(c)).map_or(0, |at| at + 1);
        out.push_str(head);
        out.push_str(operator);
        // `https://`: a URL's scheme, not a value.
        if operator == ":" && after.starts_with("//") {
            rest = after;
            continue;
        }
        if !names_secret(&name[start..]) {
            rest = after;
            continue;
        }
        let quote = after.len() - after.trim_start_matches(['"', '\'']).len();
        out.push_str(&after[..quote]);
        let value = &after[quote..];
        let end = value.find(['&', ';', ',', '\'', '"', '`', ')', ']', '}']).unwrap_or(value.len());
        if end > 0 {
            out.push_str(MASK);
        }
        rest = &value[end..];
    }
    out.push_str(rest);
    out
}

/// Runs of token characters (base64 and base64url) that look like a
/// token, each replaced by [`MASK`]: each part between slashes on its own
/// (a token in a URL's path), else the run as a whole (a base64 secret,
/// slashes and all).
fn mask_tokens(word: &str) -> String {
    let token_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+' | '/');
    let mut out = String::new();
    let mut run = String::new();
    for c in word.chars() {
        if token_char(c) {
            run.push(c);
        } else {
            out.push_str(&mask_run(&std::mem::take(&mut run)));
            out.push(c);
        }
    }
    out.push_str(&mask_run(&run));
    out
}

fn mask_run(run: &str) -> String {
    let parts: Vec<&str> = run.split('/').collect();
    if parts.iter().any(|part| looks_like_token(part)) {
        let masked: Vec<&str> =
            parts.iter().map(|part| if looks_like_token(part) { MASK } else { part }).collect();
        return masked.join("/");
    }
    if run.contains(['/', '+']) && random(run) { MASK.to_owned() } else { run.to_owned() }
}

/// Known token prefixes, each with how many characters at least follow.
const TOKEN_PREFIXES: &[(&str, usize)] = &[
    ("ghp_", 20),
    ("gho_", 20),
    ("ghu_", 20),
    ("ghs_", 20),
    ("ghr_", 20),
    ("github_pat_", 20),
    ("glpat-", 16),
    ("sk-", 16),
    ("sk_live_", 16),
    ("sk_test_", 16),
    ("rk_live_", 16),
    ("xoxa-", 8),
    ("xoxb-", 8),
    ("xoxe-", 8),
    ("xoxp-", 8),
    ("xoxr-", 8),
    ("xoxs-", 8),
    ("xapp-", 8),
    ("AIza", 30),
    ("hf_", 20),
    ("npm_", 20),
    ("pypi-", 20),
    ("eyJ", 12),
];

fn looks_like_token(part: &str) -> bool {
    let prefixed = TOKEN_PREFIXES
        .iter()
        .any(|(prefix, after)| part.len() >= prefix.len() + after && part.starts_with(prefix));
    prefixed || aws_key_id(part) || random(part)
}

/// An AWS access key id: `AKIA` (or `ASIA`, …) and 16 capitals or digits.
fn aws_key_id(part: &str) -> bool {
    part.len() == 20
        && ["AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"]
            .iter()
            .any(|prefix| part.starts_with(prefix))
        && part.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
}

/// Whether a run of 20 or more characters, letters and digits among them,
/// looks random: it changes between lower case, upper case and digits at
/// least once in three characters (a base64 secret does about every other
/// character, hex every other), or its digits come in three runs or more
/// (a secret of lower case and digits). Words and paths rarely do
/// (`shard-server-tests-2024`, `feature/AddButton2ToToolbar`).
fn random(run: &str) -> bool {
    #[derive(Clone, Copy, PartialEq)]
    enum Class {
        Lower,
        Upper,
        Digit,
        Other,
    }
    let classes: Vec<Class> = run
        .chars()
        .map(|c| match c {
            'a'..='z' => Class::Lower,
            'A'..='Z' => Class::Upper,
            '0'..='9' => Class::Digit,
            _ => Class::Other,
        })
        .collect();
    let letters = classes.iter().any(|c| matches!(c, Class::Lower | Class::Upper));
    let digits = classes.contains(&Class::Digit);
    let changes = classes
        .windows(2)
        .filter(|pair| pair[0] != pair[1] && !pair.contains(&Class::Other))
        .count();
    let digit_runs = classes
        .windows(2)
        .filter(|pair| pair[0] != Class::Digit && pair[1] == Class::Digit)
        .count()
        + usize::from(classes.first() == Some(&Class::Digit));
    run.len() >= 20 && letters && digits && (changes * 3 >= run.len() || digit_runs >= 3)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GITHUB: &str = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";

    #[test]
    fn credentials_in_urls_options_and_headers_are_masked() {
        let masked = |text: &str| mask_secrets(text);
        assert_eq!(
            masked(&format!("git clone https://oauth2:{GITHUB}@github.com/org/repo.git")),
            "git clone https://•••@github.com/org/repo.git"
        );
        assert_eq!(
            masked("psql postgresql://admin:hunter2@db.example.com:5432/app"),
            "psql postgresql://•••@db.example.com:5432/app"
        );
        assert_eq!(
            masked("curl -u admin:hunter2 https://api.example.com/v1"),
            "curl -u admin:••• https://api.example.com/v1"
        );
        assert_eq!(masked("curl -uadmin:hunter2 x"), "curl -uadmin:••• x");
        assert_eq!(masked("curl --user=admin:hunter2 x"), "curl --user=admin:••• x");
        assert_eq!(masked("wget --password hunter2 x"), "wget --password ••• x");
        assert_eq!(masked("docker login --password=hunter2"), "docker login --password=•••");
        assert_eq!(masked("mysql -uroot -phunter2 app"), "mysql -uroot -p••• app");
        assert_eq!(masked("mysql -u root -p app"), "mysql -u root -p app");
        assert_eq!(masked("sshpass -p hunter2 ssh host"), "sshpass -p ••• ssh host");
        assert_eq!(masked("sudo redis-cli -a hunter2 ping"), "sudo redis-cli -a ••• ping");
        assert_eq!(
            masked("curl -H 'Authorization: Bearer xyz' https://h/"),
            "curl -H 'Authorization: ••• ••• https://h/"
        );
        assert_eq!(
            masked("curl -H \"X-Api-Key: hunter2\" https://h/"),
            "curl -H \"X-Api-Key: ••• https://h/"
        );
        assert_eq!(masked("curl -H 'Cookie: sid=abc' x"), "curl -H 'Cookie: ••• x");
        assert_eq!(masked("http x Authorization:'token abc'"), "http x Authorization:'••• •••");
        assert_eq!(masked("echo Bearer hunter2"), "echo Bearer •••");
        assert_eq!(masked("gh auth login --token hunter2"), "gh auth login --token •••");
    }

    #[test]
    fn secret_named_values_are_masked_wherever_they_are() {
        let masked = |text: &str| mask_secrets(text);
        assert_eq!(masked("API_KEY=abc123 make deploy"), "API_KEY=••• make deploy");
        assert_eq!(masked("`export GH_TOKEN=hunter2`"), "`export GH_TOKEN=•••`");
        assert_eq!(
            masked("DB_PASSWORD=hunter2 STRIPE_SECRET=x AWS_SECRET_ACCESS_KEY=y ./run"),
            "DB_PASSWORD=••• STRIPE_SECRET=••• AWS_SECRET_ACCESS_KEY=••• ./run"
        );
        assert_eq!(
            masked("curl 'https://h/x?user=me&access_token=hunter2&page=2'"),
            "curl 'https://h/x?user=me&access_token=•••&page=2'"
        );
        assert_eq!(
            masked(r#"curl -d '{"user":"me","password":"hunter2"}' x"#),
            r#"curl -d '{"user":"me","password":"•••"}' x"#
        );
        assert_eq!(masked("git commit --author=me -m x"), "git commit --author=me -m x");
        assert_eq!(masked("DB_PWD=hunter2 ./run"), "DB_PWD=••• ./run");
    }

    #[test]
    fn token_shaped_words_are_masked() {
        let masked = |text: &str| mask_secrets(text);
        for token in [
            GITHUB,
            "github_pat_11ABCDEFG0abcdefghijkl_mnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOP",
            "glpat-abcdefghij0123456789",
            "sk-proj-abcdefghijklmnop1234",
            "sk-ant-api03-abcdefghijklmnopqrstuv",
            "xoxb-123456789012-1234567890123-abcdefghij",
            "AKIAIOSFODNN7EXAMPLE",
            "AIzaSyA-abcdefghijklmnopqrstuvwxyz01234",
            "hf_abcdefghijklmnopqrstuvwxyzABCD",
            "sk9f8e7d6c5b4a3f2e1d0c9b8a",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCY8xq2LmZ0pT",
            "3f9a1c0e7b2d4f6a8c1e3b5d7f9a0c2e4b6d8f1a",
            "q8x2k4m9z1w7r3t5y6u0p2l4",
        ] {
            assert_eq!(masked(&format!("echo {token}")), "echo •••", "{token}");
            assert_eq!(masked(&format!("X={token};")), "X=•••;", "{token}");
            if !token.contains('/') {
                assert_eq!(masked(&format!("https://h/{token}/x")), "https://h/•••/x", "{token}");
            }
        }
        assert_eq!(
            masked(
                "curl -H 'x: eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U'"
            ),
            "curl -H 'x: •••.•••.•••'"
        );
    }

    #[test]
    fn ordinary_commands_and_paths_stay_as_they_are() {
        for text in [
            "cargo test --release -p shard-server",
            "cat src/a/very/long/path/with/1234/digits.rs",
            "mkdir -p /home/user/projects/shard-server-tests-2024",
            "npm run build:production -- --mode=staging",
            "git push origin feature/AddButton2ToToolbar",
            "python -u manage.py runserver 0.0.0.0:8000",
            "ssh -p 2222 git@github.com",
            "sort -u keys.txt",
        ] {
            assert_eq!(mask_secrets(text), text);
        }
    }

    #[test]
    fn a_cut_never_leaves_half_a_secret() {
        let text = format!("Run export GH_TOKEN={GITHUB} && deploy everything now");
        let short = shown(&text, 24);
        assert_eq!(short.as_str(), "Run export GH_TOKEN=•••…");
        let hidden = shown(&format!("echo gh\u{200b}p_{}", &GITHUB[4..]), 80);
        assert!(!hidden.as_str().contains(&GITHUB[4..]), "{hidden}");
        assert_eq!(shown("Which\u{1b}[31m branch?\n", 80).as_str(), "Which [31m branch?");
    }
}
