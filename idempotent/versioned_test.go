package idempotent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// account is a document whose state (a credit limit) is changed by
// versioned changes; it records the content hash of its last maxHashes
// applied versions.
type account struct {
	ID        string           `json:"id"`
	TenantID  string           `json:"tenantId"`
	Limit     int64            `json:"limit"`
	Version   int64            `json:"version"`
	Hashes    map[int64]string `json:"hashes"`
	HashCount int              `json:"hashCount"`
}

const maxHashes = 4

func (a *account) StateVersion() int64 { return a.Version }

func (a *account) AppliedHash(v int64) (string, bool) {
	h, ok := a.Hashes[v]
	return h, ok
}

var _ idempotent.VersionedDocument = (*account)(nil)

// limitHash is the content hash of a change to limit.
func limitHash(limit int64) string { return "limit-" + strconv.FormatInt(limit, 10) }

// limitChange is the change of account id to limit as version v.
func limitChange(id string, v, limit int64) idempotent.VersionedChange[*account] {
	hash := limitHash(limit)
	return idempotent.VersionedChange[*account]{
		PartitionKey: id, ID: id, Version: v, Hash: hash, What: fmt.Sprintf("limit %d", limit),
		Patch: idempotent.Patch{
			If: []idempotent.Below{{Path: "/hashCount", Value: maxHashes}},
			Ops: []idempotent.PatchOp{
				{Op: idempotent.PatchSet, Path: "/limit", Value: limit},
				{Op: idempotent.PatchSet, Path: "/hashes/" + strconv.FormatInt(v, 10), Value: hash},
				{Op: idempotent.PatchIncrement, Path: "/hashCount", Value: int64(1)},
			},
		},
		Decode: func(body []byte) (*account, error) {
			a := new(account)
			return a, json.Unmarshal(body, a)
		},
		Apply: func(a *account) ([]byte, error) {
			a.Limit, a.Version = limit, v
			if a.Hashes == nil {
				a.Hashes = map[int64]string{}
			}
			a.Hashes[v] = hash
			for len(a.Hashes) > maxHashes {
				lowest := v
				for k := range a.Hashes {
					lowest = min(lowest, k)
				}
				delete(a.Hashes, lowest)
			}
			a.HashCount = len(a.Hashes)
			return json.Marshal(a)
		},
	}
}

// openAccount stores account id at version 1.
func openAccount(t testing.TB, s idempotent.Store, id string) {
	t.Helper()
	body, _ := json.Marshal(account{ID: id, TenantID: id, Limit: 100, Version: 1, Hashes: map[int64]string{}})
	if _, err := s.CreateBatch(context.Background(), id, []idempotent.Document{{ID: id, Body: body}}); err != nil {
		t.Fatal(err)
	}
}

func readAccount(t testing.TB, s *memstore.Store, id string) account {
	t.Helper()
	it, ok := s.Get(id, id)
	if !ok {
		t.Fatalf("account %s is not stored", id)
	}
	var a account
	if err := json.Unmarshal(it.Body, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// noPatch hides the PatchDocument of a store: every change is read and
// replaced.
type noPatch struct{ idempotent.DocumentStore }

var accountConfig = idempotent.VersionedConfig{ReusedReason: "LimitVersionReused", MissingReason: "AccountNotYetOpened", MissingRetryAfter: 7 * time.Second}

// TestVersioned_RoundTrips pins the outcome and the store calls of every
// path: with a store that patches, a change applied on its first delivery
// costs one call (the patch), a redelivery that is stale one (the read), a
// stale change on its first delivery two (the refused patch, the read); a
// redelivery that applies two (read, replace). Without a patch, a first
// delivery that applies costs two. The stored state is the newest
// version's.
func TestVersioned_RoundTrips(t *testing.T) {
	steps := []struct {
		name       string
		v, limit   int64
		delivery   uint32
		want       idempotent.Outcome
		wantReason string
		calls      int // with a patch
		noPatch    int // without one
	}{
		{"applied, first delivery", 2, 200, 1, idempotent.Applied, "", 1, 2},
		{"applied again, redelivery", 2, 200, 2, idempotent.Stale, "", 1, 1},
		{"duplicate, first delivery (a resend)", 2, 200, 1, idempotent.Stale, "", 2, 1},
		{"reused version, first delivery", 2, 999, 1, idempotent.Mismatch, "LimitVersionReused", 2, 1},
		{"reused version, redelivery", 2, 999, 3, idempotent.Mismatch, "LimitVersionReused", 1, 1},
		{"newer, redelivery: read, then replace", 3, 300, 2, idempotent.Applied, "", 2, 2},
		{"newer by two, first delivery", 4, 400, 1, idempotent.Applied, "", 1, 2},
		{"out of order, first delivery", 3, 300, 1, idempotent.Stale, "", 2, 1},
		{"newer, first delivery", 6, 600, 1, idempotent.Applied, "", 1, 2},
		{"skipped version arrives late", 5, 500, 1, idempotent.Stale, "", 2, 1},
	}
	for _, patch := range []bool{true, false} {
		t.Run(fmt.Sprintf("patch=%v", patch), func(t *testing.T) {
			s := newCallCounter()
			s.Store = memstore.New("/tenantId")
			openAccount(t, s, "acc-1")
			var store idempotent.DocumentStore = s
			if !patch {
				store = noPatch{s}
			}
			v := idempotent.NewVersioned[*account](store, accountConfig)
			for _, st := range steps {
				before, doc := s.count(), readAccount(t, s.Store, "acc-1")
				r := v.Apply(t.Context(), idempotent.Message{ID: "m", DeliveryCount: st.delivery}, limitChange("acc-1", st.v, st.limit))
				if r.Outcome != st.want || r.Reason != st.wantReason || r.Key != "acc-1" {
					t.Errorf("%s: %v %q (%s), want %v %q", st.name, r.Outcome, r.Reason, r.Description, st.want, st.wantReason)
				}
				want := st.calls
				if !patch {
					want = st.noPatch
				}
				if n := s.count() - before; n != want {
					t.Errorf("%s: %d store calls, want %d", st.name, n, want)
				}
				if st.want == idempotent.Mismatch && (!strings.Contains(r.Description, limitHash(st.limit)) || !strings.Contains(r.Description, limitHash(200))) {
					t.Errorf("%s: description %q does not name both hashes", st.name, r.Description)
				}
				if after := readAccount(t, s.Store, "acc-1"); st.want != idempotent.Applied && after.Version != doc.Version {
					t.Errorf("%s: %v changed the stored version %d to %d", st.name, st.want, doc.Version, after.Version)
				}
			}
			a := readAccount(t, s.Store, "acc-1")
			if a.Version != 6 || a.Limit != 600 || a.HashCount != 4 || len(a.Hashes) != 4 || a.Hashes[6] != limitHash(600) {
				t.Errorf("stored %+v, want version 6, limit 600, 4 hashes counted", a)
			}
		})
	}
}

// TestVersioned_CallersConditionFallsBackToReplace: a document the
// caller's patch cannot keep correct (here: its hashes are full and the
// lowest must go) fails the patch's condition like a stale change, and is
// read and replaced instead.
func TestVersioned_CallersConditionFallsBackToReplace(t *testing.T) {
	s := newCallCounter()
	s.Store = memstore.New("/tenantId")
	openAccount(t, s, "acc-1")
	v := idempotent.NewVersioned[*account](s, accountConfig)
	for ver := int64(2); ver <= 1+maxHashes; ver++ {
		if r := v.Apply(t.Context(), idempotent.Message{DeliveryCount: 1}, limitChange("acc-1", ver, ver*100)); r.Outcome != idempotent.Applied {
			t.Fatalf("version %d: %v (%s)", ver, r.Outcome, r.Description)
		}
	}
	before := s.count()
	if r := v.Apply(t.Context(), idempotent.Message{DeliveryCount: 1}, limitChange("acc-1", 9, 900)); r.Outcome != idempotent.Applied || s.count()-before != 3 {
		t.Fatalf("into a full document: %v with %d calls, want applied with patch, read and replace", r.Outcome, s.count()-before)
	}
	if a := readAccount(t, s.Store, "acc-1"); a.Version != 9 || len(a.Hashes) != maxHashes || a.HashCount != maxHashes || a.Hashes[2] != "" {
		t.Errorf("stored %+v, want version 9 and the %d most recent hashes", a, maxHashes)
	}
}

// TestVersioned_NotYetCreated: a change whose document does not exist yet
// is retried after the caller's delay with the caller's reason, not as a
// dependency failure, on the patch path and the read path; the zero config
// names ReasonNotYetCreated and DefaultMissingRetryAfter.
func TestVersioned_NotYetCreated(t *testing.T) {
	for _, tt := range []struct {
		name       string
		cfg        idempotent.VersionedConfig
		delivery   uint32
		wantReason string
		wantAfter  time.Duration
	}{
		{"patch", accountConfig, 1, "AccountNotYetOpened", 7 * time.Second},
		{"read", accountConfig, 2, "AccountNotYetOpened", 7 * time.Second},
		{"defaults", idempotent.VersionedConfig{}, 1, idempotent.ReasonNotYetCreated, idempotent.DefaultMissingRetryAfter},
	} {
		s := memstore.New("/tenantId")
		r := idempotent.NewVersioned[*account](s, tt.cfg).Apply(t.Context(), idempotent.Message{DeliveryCount: tt.delivery}, limitChange("acc-9", 2, 200))
		if r.Outcome != idempotent.Transient || r.Reason != tt.wantReason || r.RetryAfter != tt.wantAfter || r.DependencyFailed() || !errors.Is(r.Err, idempotent.ErrNotFound) {
			t.Errorf("%s: %v %q after %v (dependency %v): want a retry after %v, %s", tt.name, r.Outcome, r.Reason, r.RetryAfter, r.DependencyFailed(), tt.wantAfter, tt.wantReason)
		}
		if n := len(s.Items()); n != 0 {
			t.Errorf("%s: %d documents written", tt.name, n)
		}
	}
}

// TestVersioned_BoundedRetries: a replace that keeps finding the document
// changed reads and decides again, Attempts times, then retries the
// message with ReasonConcurrentUpdate.
func TestVersioned_BoundedRetries(t *testing.T) {
	s := newCallCounter()
	s.Store = memstore.New("/tenantId")
	openAccount(t, s, "acc-1")
	s.replaceErr = fmt.Errorf("412: %w", idempotent.ErrPreconditionFailed)
	cfg := accountConfig
	cfg.Attempts = 2
	before := s.count()
	r := idempotent.NewVersioned[*account](noPatch{s}, cfg).Apply(t.Context(), idempotent.Message{DeliveryCount: 1}, limitChange("acc-1", 2, 200))
	if n := s.count() - before; r.Outcome != idempotent.Transient || r.Reason != idempotent.ReasonConcurrentUpdate || n != 4 {
		t.Errorf("%v %q after %d calls, want a ConcurrentUpdate retry after 2 reads and 2 replaces", r.Outcome, r.Reason, n)
	}
}

// TestVersioned_ConcurrentChanges: 24 versions of one document, each
// delivered twice, concurrently and in random order, with and without a
// patch: each version is applied at most once, and the stored state is the
// newest version's. A delivery retried for a concurrent update is
// delivered again, as the broker would.
func TestVersioned_ConcurrentChanges(t *testing.T) {
	for _, patch := range []bool{true, false} {
		t.Run(fmt.Sprintf("patch=%v", patch), func(t *testing.T) {
			s := memstore.New("/tenantId")
			openAccount(t, s, "acc-c")
			var store idempotent.DocumentStore = s
			if !patch {
				store = noPatch{s}
			}
			v := idempotent.NewVersioned[*account](store, accountConfig)
			const last = 25
			var order []int64
			for ver := int64(2); ver <= last; ver++ {
				order = append(order, ver, ver)
			}
			rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			var mu sync.Mutex
			applied := map[int64]int{}
			var wg sync.WaitGroup
			for i, ver := range order {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for dc := uint32(1 + i%2); ; dc++ {
						r := v.Apply(context.Background(), idempotent.Message{DeliveryCount: dc}, limitChange("acc-c", ver, ver*10))
						switch r.Outcome {
						case idempotent.Applied:
							mu.Lock()
							applied[ver]++
							mu.Unlock()
						case idempotent.Transient:
							if r.Reason == idempotent.ReasonConcurrentUpdate {
								continue
							}
							t.Errorf("version %d: %v %q (%s)", ver, r.Outcome, r.Reason, r.Description)
						case idempotent.Stale:
						default:
							t.Errorf("version %d: %v %q (%s)", ver, r.Outcome, r.Reason, r.Description)
						}
						return
					}
				}()
			}
			wg.Wait()
			for ver, n := range applied {
				if n > 1 {
					t.Errorf("version %d applied %d times", ver, n)
				}
			}
			if applied[last] != 1 {
				t.Errorf("the newest version applied %d times, want once", applied[last])
			}
			if a := readAccount(t, s, "acc-c"); a.Version != last || a.Limit != last*10 {
				t.Errorf("stored version %d limit %d, want %d and %d", a.Version, a.Limit, last, last*10)
			}
		})
	}
}

// TestVersioned_Failures: a store that fails and a document that does not
// decode reach the Failure hook (StoreFailure by default), and nothing is
// written.
func TestVersioned_Failures(t *testing.T) {
	throttled := fmt.Errorf("429: %w", idempotent.ErrTransient)
	t.Run("read throttled", func(t *testing.T) {
		s := newCallCounter()
		s.Store = memstore.New("/tenantId")
		openAccount(t, s, "acc-1")
		s.readErr = throttled
		r := idempotent.NewVersioned[*account](s, accountConfig).Apply(t.Context(), idempotent.Message{DeliveryCount: 2}, limitChange("acc-1", 2, 200))
		if r.Outcome != idempotent.Transient || r.Reason != idempotent.ReasonStoreUnavailable || !r.DependencyFailed() || !errors.Is(r.Err, throttled) {
			t.Errorf("%v %q (%s): want a dependency retry", r.Outcome, r.Reason, r.Description)
		}
	})
	t.Run("undecodable document", func(t *testing.T) {
		s := memstore.New("/tenantId")
		if _, err := s.CreateBatch(t.Context(), "acc-1", []idempotent.Document{{ID: "acc-1", Body: []byte(`{"id":"acc-1","tenantId":"acc-1","version":"one"}`)}}); err != nil {
			t.Fatal(err)
		}
		var gotOp string
		cfg := accountConfig
		cfg.Failure = func(key, op string, err error) idempotent.Result {
			gotOp = op
			return idempotent.Result{Outcome: idempotent.Invalid, Key: key, Reason: "Unreadable", Err: err}
		}
		r := idempotent.NewVersioned[*account](s, cfg).Apply(t.Context(), idempotent.Message{DeliveryCount: 2}, limitChange("acc-1", 2, 200))
		if r.Outcome != idempotent.Invalid || r.Reason != "Unreadable" || gotOp != "read" {
			t.Errorf("%v %q, hook saw %q: want the hook's result for the read", r.Outcome, r.Reason, gotOp)
		}
		if it, _ := s.Get("acc-1", "acc-1"); !strings.Contains(string(it.Body), `"one"`) {
			t.Errorf("document rewritten: %s", it.Body)
		}
	})
}
