//! Sorting through one instance of the sort algorithm. Every `sort_by`
//! with its own closure is a copy of the whole algorithm in the WASM (about
//! 3.5 KB each); the page's lists are short, so each is ranked by a key of
//! one type instead and the ranks are sorted.

/// What a list is ordered by: a number, then a text.
pub type Rank = (u64, String);

/// Sorts `list` by `rank`, keeping the order of equal ranks.
pub fn sort_by_rank<T>(list: &mut Vec<T>, rank: impl Fn(&T) -> Rank) {
    let mut ranked: Vec<(Rank, usize)> =
        list.iter().enumerate().map(|(index, item)| (rank(item), index)).collect();
    // The index makes every key distinct, so the unstable sort is stable.
    ranked.sort_unstable();
    let mut slots: Vec<Option<T>> = list.drain(..).map(Some).collect();
    list.extend(ranked.into_iter().filter_map(|(_, index)| slots[index].take()));
}

#[cfg(test)]
mod tests {
    use super::sort_by_rank;

    #[test]
    fn ranks_order_and_ties_keep_their_order() {
        let mut list = vec![("b", 2), ("a", 1), ("c", 2), ("d", 0)];
        sort_by_rank(&mut list, |(_, number)| (*number, String::new()));
        assert_eq!(list, [("d", 0), ("a", 1), ("b", 2), ("c", 2)]);
        sort_by_rank(&mut list, |(name, _)| (0, (*name).to_owned()));
        assert_eq!(list, [("a", 1), ("b", 2), ("c", 2), ("d", 0)]);
    }
}
