// An editor, for the black-box tests: the official TypeScript SDK's ACP
// client (@agentclientprotocol/sdk), driving `shard acp` as any editor
// would. Not Shard's code: if it and Shard agree, Shard speaks ACP.
//
// It starts `$SHARD_BIN acp ...ARGS` and takes one JSON command per line on
// its stdin; it writes one JSON line per thing that happened on its stdout:
//
//   {"do": "initialize"}                     -> {"event": "answer", "to": "initialize", ...}
//   {"do": "new", "cwd"}                     -> {"event": "answer", "to": "new", "result"}
//   {"do": "list", "cwd"?}                   -> {"event": "answer", "to": "list", "result"}
//   {"do": "load", "session"}                -> {"event": "answer", "to": "load", "result"}
//   {"do": "resume", "session"}              -> {"event": "answer", "to": "resume", "result"}
//   {"do": "set_mode", "session", "mode"}    -> {"event": "answer", "to": "set_mode", ...}
//   {"do": "set_option", "session", "config", "value"} -> {"event": "answer", "to": "set_option", ...}
//   {"do": "prompt", "session", "text", "tag"} -> {"event": "answer", "to": "prompt", "tag", "result"}
//   {"do": "cancel", "session"}              (a notification: no answer)
//   {"do": "answer", "question", "option"}   answers a question put to the editor
//
// and, as they come: {"event": "update", "session", "update"} for each
// `session/update`, {"event": "asked", "question", "params"} for each
// `session/request_permission`, {"event": "taken_back", "question"} when
// the agent cancels one (`$/cancel_request`), and {"event": "closed",
// "code", "stderr"} when `shard acp` exits. A failed request answers with
// {"error": {code, message, data}} in place of "result".

import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Readable, Writable } from 'node:stream';
import { client, ndJsonStream } from '@agentclientprotocol/sdk';

const say = (event) => process.stdout.write(JSON.stringify(event) + '\n');

const agent = spawn(process.env.SHARD_BIN, ['acp', ...process.argv.slice(2)], {
  stdio: ['pipe', 'pipe', 'pipe'],
  env: process.env,
});
let stderr = '';
agent.stderr.on('data', (chunk) => { stderr += chunk; });
agent.on('exit', (code) => {
  say({ event: 'closed', code, stderr });
  process.exit(0);
});

const questions = new Map();
let asked = 0;

const app = client()
  .onNotification('session/update', ({ params }) => {
    say({ event: 'update', session: params.sessionId, update: params.update });
  })
  .onRequest('session/request_permission', ({ params, signal }) => {
    const question = ++asked;
    say({ event: 'asked', question, params });
    return new Promise((resolve) => {
      questions.set(question, resolve);
      signal.addEventListener('abort', () => {
        if (!questions.delete(question)) return;
        say({ event: 'taken_back', question });
        resolve({ outcome: { outcome: 'cancelled' } });
      });
    });
  });

const connection = app.connect(
  ndJsonStream(Writable.toWeb(agent.stdin), Readable.toWeb(agent.stdout)),
);
const acp = connection.agent;

async function answer(to, tag, call) {
  try {
    say({ event: 'answer', to, tag, result: (await call()) ?? null });
  } catch (error) {
    say({ event: 'answer', to, tag, error: { code: error.code, message: error.message, data: error.data } });
  }
}

const lines = createInterface({ input: process.stdin });
lines.on('line', (line) => {
  const command = JSON.parse(line);
  switch (command.do) {
    case 'initialize':
      answer('initialize', command.tag, () =>
        acp.request('initialize', { protocolVersion: 1, clientCapabilities: {} }));
      break;
    case 'new':
      answer('new', command.tag, () => acp.request('session/new', { cwd: command.cwd, mcpServers: [] }));
      break;
    case 'list':
      answer('list', command.tag, () =>
        acp.request('session/list', command.cwd ? { cwd: command.cwd } : {}));
      break;
    case 'load':
      answer('load', command.tag, () =>
        acp.request('session/load', { sessionId: command.session, cwd: command.cwd ?? '/', mcpServers: [] }));
      break;
    case 'resume':
      answer('resume', command.tag, () =>
        acp.request('session/resume', { sessionId: command.session, cwd: command.cwd ?? '/', mcpServers: [] }));
      break;
    case 'set_mode':
      answer('set_mode', command.tag, () =>
        acp.request('session/set_mode', { sessionId: command.session, modeId: command.mode }));
      break;
    case 'set_option':
      answer('set_option', command.tag, () => acp.request('session/set_config_option', {
        sessionId: command.session, configId: command.config, value: command.value,
      }));
      break;
    case 'prompt':
      answer('prompt', command.tag, () => acp.request('session/prompt', {
        sessionId: command.session,
        prompt: [{ type: 'text', text: command.text }],
      }));
      break;
    case 'cancel':
      acp.notify('session/cancel', { sessionId: command.session });
      break;
    case 'answer': {
      const resolve = questions.get(command.question);
      questions.delete(command.question);
      resolve?.({ outcome: { outcome: 'selected', optionId: command.option } });
      break;
    }
    default:
      say({ event: 'unknown', command });
  }
});
lines.on('close', () => agent.stdin.end());
