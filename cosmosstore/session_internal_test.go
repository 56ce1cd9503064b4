package cosmosstore

import "testing"

// The store keeps one token per partition for the partitions used most
// recently; an evicted partition's next read carries no token (and is
// served at the account's consistency). Tokens merge per partition key
// range, keeping the higher version and LSN.
func TestSessionTokens_MergeAndEvict(t *testing.T) {
	st := newSessionTokens(2)
	st.observe("a", "0:-1#10")
	st.observe("a", "0:-1#7") // a lagging read: kept 10
	st.observe("a", "1:-1#3") // another range (after a split)
	st.observe("b", "0:5")    // a simple token
	st.observe("b", "0:4")
	st.observe("b", "")
	if got, want := st.get("a"), "0:-1#10,1:-1#3"; got != want {
		t.Errorf("a = %q, want %q", got, want)
	}
	if got, want := st.get("b"), "0:5"; got != want {
		t.Errorf("b = %q, want %q", got, want)
	}
	st.observe("a", "0:0#11#1=4") // a higher version wins whatever its LSN
	if got, want := st.get("a"), "0:0#11#1=4,1:-1#3"; got != want {
		t.Errorf("a = %q, want %q", got, want)
	}
	st.observe("c", "0:-1#1") // evicts b, used least recently
	if got := st.get("b"); got != "" {
		t.Errorf("b after eviction = %q, want none", got)
	}
	if st.get("a") == "" || st.get("c") == "" || st.lru.Len() != 2 || len(st.byKey) != 2 {
		t.Errorf("a %q, c %q, %d entries; want both kept and 2 entries", st.get("a"), st.get("c"), st.lru.Len())
	}
	st.observe("d", "0:x#y") // not parsed: kept as the service sent it
	st.observe("d", "0:-1#2")
	if got := st.get("d"); got != "0:-1#2" {
		t.Errorf("d = %q", got)
	}
}
