//! Sorting through one instance of the sort algorithm. Every `sort_by`
//! with its own closure is a copy of the whole algorithm in the WASM (about
//! 3.5 KB each); the page's lists are short, so each is ranked by a key of
//! one type instead and the ranks are sorted. So is every `collect()` into
//! a B-tree, which sorts its items first (a stable sort per item type):
//! the page's sets and maps are built by inserting instead.

use std::collections::{BTreeMap, BTreeSet};

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

/// The set of `items`, inserted one by one (see the module's notes).
pub fn set_of<T: Ord>(items: impl IntoIterator<Item = T>) -> BTreeSet<T> {
    let mut set = BTreeSet::new();
    set.extend(items);
    set
}

/// The map of `entries`, inserted one by one; a later entry of a key wins,
/// as with `collect()`.
pub fn map_of<K: Ord, V>(entries: impl IntoIterator<Item = (K, V)>) -> BTreeMap<K, V> {
    let mut map = BTreeMap::new();
    map.extend(entries);
    map
}

#[cfg(test)]
mod tests {
    use super::{map_of, set_of, sort_by_rank};

    #[test]
    fn ranks_order_and_ties_keep_their_order() {
        let mut list = vec![("b", 2), ("a", 1), ("c", 2), ("d", 0)];
        sort_by_rank(&mut list, |(_, number)| (*number, String::new()));
        assert_eq!(list, [("d", 0), ("a", 1), ("b", 2), ("c", 2)]);
        sort_by_rank(&mut list, |(name, _)| (0, (*name).to_owned()));
        assert_eq!(list, [("a", 1), ("b", 2), ("c", 2), ("d", 0)]);
    }

    #[test]
    fn sets_and_maps_built_by_inserting_read_as_collected_ones() {
        let items = ["b", "a", "c", "a"];
        assert_eq!(set_of(items), items.into_iter().collect());
        let entries = [("w2", 1), ("w1", 2), ("w2", 3)];
        let map = map_of(entries);
        assert_eq!(map, entries.into_iter().collect());
        assert_eq!(map["w2"], 3, "the later entry of a key wins");
    }
}
