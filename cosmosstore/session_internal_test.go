package cosmosstore

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

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

// A partition whose token names several ranges, the first of them not the
// lowest, is sent with its ranges sorted.
func TestSessionTokens_RangesSorted(t *testing.T) {
	st := newSessionTokens(8)
	st.observe("e", "1:-1#3")
	st.observe("e", "0:-1#9, 2:-1#1")
	st.observe("e", "1:-1#2") // older than what range 1 has
	if got, want := st.get("e"), "0:-1#9,1:-1#3,2:-1#1"; got != want {
		t.Errorf("e = %q, want %q", got, want)
	}
}

// The tokens of SessionTokenPartitions partitions of one range each take
// well under a megabyte, so that the collector's work for them stays small.
func TestSessionTokens_Memory(t *testing.T) {
	pks := make([]string, SessionTokenPartitions)
	toks := make([]string, SessionTokenPartitions)
	for i := range pks {
		pks[i] = fmt.Sprintf("order-%08d-0000-0000-0000-000000000000", i)
		toks[i] = fmt.Sprintf("0:-1#%d", 1000+i)
	}
	// The least of three fillings: the heap is the process's, and what
	// another goroutine holds meanwhile only adds to it.
	perEntry := math.Inf(1)
	for range 3 {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		st := newSessionTokens(SessionTokenPartitions)
		for i := range pks {
			st.observe(pks[i], toks[i])
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		perEntry = min(perEntry, (float64(m1.HeapAlloc)-float64(m0.HeapAlloc))/SessionTokenPartitions)
		runtime.KeepAlive(st)
	}
	t.Logf("%.0f bytes per partition, %d partitions", perEntry, SessionTokenPartitions)
	if perEntry > 240 {
		t.Errorf("%.0f bytes per partition kept, want at most 240", perEntry)
	}
}

// TestParseSessionToken: a simple token is an LSN; a vector token
// "version#globalLSN#region=LSN…" is read for its version and global LSN;
// anything else cannot be parsed.
func TestParseSessionToken(t *testing.T) {
	for _, tt := range []struct {
		tok          string
		version, lsn int64
		ok           bool
	}{
		{"12", 0, 12, true},
		{"1#34", 1, 34, true},
		{"2#56#1=20#3=40", 2, 56, true},
		{"2#56#", 2, 56, true},
		{"", 0, 0, false},
		{"#", 0, 0, false},
		{"x", 0, 0, false},
		{"1#x#3", 1, 0, false},
		{"x#5", 0, 5, false},
		{"1#", 1, 0, false},
	} {
		v, l, ok := parseSessionToken(tt.tok)
		if ok != tt.ok || ok && (v != tt.version || l != tt.lsn) {
			t.Errorf("parseSessionToken(%q) = %d, %d, %v; want %d, %d, %v", tt.tok, v, l, ok, tt.version, tt.lsn, tt.ok)
		}
	}
	if got := testing.AllocsPerRun(100, func() { parseSessionToken("2#56#1=20#3=40") }); got != 0 {
		t.Errorf("parseSessionToken allocates %v times, want 0", got)
	}
}

// TestSessionTokens_LeastRecentlyUsed: the partitions kept are always the
// ones used most recently (by a get that found one, or an observe), in
// a long random mix of reads and responses, as a plain ordered list of
// the keys says they should be; each keeps its latest token.
func TestSessionTokens_LeastRecentlyUsed(t *testing.T) {
	const max, keys = 4, 9
	st := newSessionTokens(max)
	var order []string // most recently used first
	lsn := map[string]int{}
	use := func(pk string) {
		order = slices.DeleteFunc(order, func(k string) bool { return k == pk })
		order = append([]string{pk}, order...)
		if len(order) > max {
			delete(lsn, order[max])
			order = order[:max]
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for step := range 5000 {
		pk := fmt.Sprint("pk-", rng.IntN(keys))
		if rng.IntN(2) == 0 {
			lsn[pk] = step
			st.observe(pk, fmt.Sprintf("0:-1#%d", step))
			use(pk)
		} else {
			want := ""
			if n, ok := lsn[pk]; ok {
				want = fmt.Sprintf("0:-1#%d", n)
				use(pk)
			}
			if got := st.get(pk); got != want {
				t.Fatalf("step %d: get(%s) = %q, want %q", step, pk, got, want)
			}
		}
		if st.lru.Len() != len(order) || len(st.byKey) != len(order) {
			t.Fatalf("step %d: %d entries in the order, %d in the index; want %d", step, st.lru.Len(), len(st.byKey), len(order))
		}
	}
}

// TestSessionTokens_NoAllocationPerPartition: once the store keeps its
// most partitions, the token of a new one replaces the least recently
// used without an allocation.
func TestSessionTokens_NoAllocationPerPartition(t *testing.T) {
	const max = 64
	st := newSessionTokens(max)
	pks := make([]string, 2000)
	for i := range pks {
		pks[i] = fmt.Sprint("order-", i)
	}
	for _, pk := range pks[:max] {
		st.observe(pk, "0:-1#1")
	}
	next := max
	if got := testing.AllocsPerRun(1000, func() {
		st.observe(pks[next], "0:-1#2")
		next++
	}); got != 0 {
		t.Errorf("a new partition's token allocates %v times, want 0", got)
	}
	if st.lru.Len() != max {
		t.Errorf("%d partitions kept, want %d", st.lru.Len(), max)
	}
}
