package memstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// feedDoc is what the tests read of a change feed document.
type feedDoc struct {
	ID      string `json:"id"`
	OrderID string `json:"orderId"`
	V       int    `json:"v"`
	LSN     uint64 `json:"_lsn"`
	ETag    string `json:"_etag"`
}

func versioned(pk, id string, v int) idempotent.Document {
	b, _ := json.Marshal(map[string]any{"id": id, "orderId": pk, "v": v})
	return idempotent.Document{ID: id, Body: b}
}

// readAll reads range fr from continuation to its end in pages of max.
func readAll(t *testing.T, f *memstore.ChangeFeed, fr, cont string, max int) ([]feedDoc, string) {
	t.Helper()
	var out []feedDoc
	for {
		docs, next, err := f.ReadChanges(context.Background(), fr, cont, max)
		if err != nil {
			t.Fatal(err)
		}
		if next == "" {
			t.Fatalf("empty continuation after %q", cont)
		}
		if len(docs) > max {
			t.Fatalf("page of %d documents, max %d", len(docs), max)
		}
		for _, d := range docs {
			var fd feedDoc
			if err := json.Unmarshal(d, &fd); err != nil {
				t.Fatal(err)
			}
			out = append(out, fd)
		}
		if len(docs) == 0 {
			if next != cont && cont != "" {
				t.Fatalf("an empty page moved the continuation from %q to %q", cont, next)
			}
			return out, next
		}
		cont = next
	}
}

func TestChangeFeed_LatestVersionOnceAtItsLastWrite(t *testing.T) {
	ctx := context.Background()
	s := memstore.New("/orderId")
	f := s.ChangeFeed(memstore.ChangeFeedOptions{})
	ranges, _ := f.FeedRanges(ctx)
	if len(ranges) != 1 {
		t.Fatalf("ranges = %v", ranges)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	{
		_, err := s.CreateBatch(ctx, "p", []idempotent.Document{versioned("p", "a", 1), versioned("p", "b", 1)})
		must(err)
	}
	_, etag, _ := s.ReadDocument(ctx, "p", "a")
	etag, err := s.ReplaceDocument(ctx, "p", versioned("p", "a", 2), etag)
	must(err)
	_, err = s.ReplaceDocument(ctx, "p", versioned("p", "a", 3), etag)
	must(err)

	got, cont := readAll(t, f, ranges[0], "", 10)
	if len(got) != 2 || got[0].ID != "b" || got[1].ID != "a" || got[1].V != 3 {
		t.Fatalf("feed = %+v, want b then a in its latest version 3 (once, at its last write)", got)
	}
	if got[0].LSN == 0 || got[0].LSN >= got[1].LSN || got[1].ETag == "" {
		t.Errorf("system properties _lsn/_etag missing or out of order: %+v", got)
	}
	// Nothing new: an empty page with the same continuation.
	again, cont2 := readAll(t, f, ranges[0], cont, 10)
	if len(again) != 0 || cont2 != cont {
		t.Fatalf("re-read = %+v, %q; want nothing and %q", again, cont2, cont)
	}
	// A write after the read is a new change.
	_, etag, _ = s.ReadDocument(ctx, "p", "b")
	_, err = s.ReplaceDocument(ctx, "p", versioned("p", "b", 2), etag)
	must(err)
	later, _ := readAll(t, f, ranges[0], cont, 10)
	if len(later) != 1 || later[0].ID != "b" || later[0].V != 2 {
		t.Fatalf("after another write: %+v", later)
	}
}

func TestChangeFeed_PagesResumeExactlyAfterTheirContinuation(t *testing.T) {
	ctx := context.Background()
	s := memstore.New("/orderId")
	f := s.ChangeFeed(memstore.ChangeFeedOptions{Ranges: 3, Seed: 7})
	want := map[string]bool{}
	for i := range 40 {
		pk := fmt.Sprintf("ord-%d", i%13)
		id := fmt.Sprintf("d-%d", i)
		if _, err := s.CreateBatch(ctx, pk, []idempotent.Document{versioned(pk, id, 1)}); err != nil {
			t.Fatal(err)
		}
		want[pk+"/"+id] = true
	}
	ranges, _ := f.FeedRanges(ctx)
	seen := map[string]bool{}
	for _, fr := range ranges {
		for _, size := range []int{1, 3} {
			got, _ := readAll(t, f, fr, "", size)
			for _, d := range got {
				if f.RangeOf(d.OrderID) != fr {
					t.Errorf("document of %s read from range %s, its range is %s", d.OrderID, fr, f.RangeOf(d.OrderID))
				}
				if size == 1 {
					if seen[d.OrderID+"/"+d.ID] {
						t.Errorf("%s/%s read twice", d.OrderID, d.ID)
					}
					seen[d.OrderID+"/"+d.ID] = true
				}
			}
		}
	}
	if len(seen) != len(want) {
		t.Errorf("the ranges together returned %d documents, want %d (each partition key in exactly one range)", len(seen), len(want))
	}
}

// The model promises only the order of one partition key value's changes:
// it interleaves the others, so a reader that relies on the write order
// across partition keys fails against it.
func TestChangeFeed_OrderIsKeptOnlyWithinAPartitionKey(t *testing.T) {
	ctx := context.Background()
	s := memstore.New("/orderId")
	f := s.ChangeFeed(memstore.ChangeFeedOptions{Seed: 1})
	var writeOrder []string
	for i := range 30 {
		pk := fmt.Sprintf("ord-%d", i%5)
		id := fmt.Sprintf("d-%02d", i)
		if _, err := s.CreateBatch(ctx, pk, []idempotent.Document{versioned(pk, id, 1)}); err != nil {
			t.Fatal(err)
		}
		writeOrder = append(writeOrder, id)
	}
	ranges, _ := f.FeedRanges(ctx)
	got, _ := readAll(t, f, ranges[0], "", 100)
	var ids []string
	last := map[string]string{}
	for _, d := range got {
		ids = append(ids, d.ID)
		if d.ID < last[d.OrderID] {
			t.Errorf("partition %s: %s after %s", d.OrderID, d.ID, last[d.OrderID])
		}
		last[d.OrderID] = d.ID
	}
	if slices.Equal(ids, writeOrder) {
		t.Errorf("the page is in write order across partition keys; the model must not promise what Cosmos DB does not")
	}
}

func TestChangeFeed_RefusesUnknownRangesAndForeignContinuations(t *testing.T) {
	ctx := context.Background()
	s := memstore.New("/orderId")
	f := s.ChangeFeed(memstore.ChangeFeedOptions{Ranges: 2})
	ranges, _ := f.FeedRanges(ctx)
	_, cont0, err := f.ReadChanges(ctx, ranges[0], "", 10)
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"unknown range":       func() error { _, _, err := f.ReadChanges(ctx, "nope", "", 10); return err },
		"other range's token": func() error { _, _, err := f.ReadChanges(ctx, ranges[1], cont0, 10); return err },
		"garbage token":       func() error { _, _, err := f.ReadChanges(ctx, ranges[0], "xyz", 10); return err },
	} {
		if err := call(); !errors.Is(err, memstore.ErrUnknownFeedRange) {
			t.Errorf("%s: err = %v, want ErrUnknownFeedRange", name, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := f.ReadChanges(cctx, ranges[0], "", 10); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: err = %v", err)
	}
}

func TestChangeFeed_ExpiredDocumentsAreNotReturned(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := memstore.NewWithClock("/orderId", func() time.Time { return now })
	f := s.ChangeFeed(memstore.ChangeFeedOptions{})
	body := []byte(`{"id":"m","orderId":"p","ttl":5}`)
	if _, err := s.CreateBatch(ctx, "p", []idempotent.Document{{ID: "m", Body: body}, versioned("p", "k", 1)}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(6 * time.Second)
	ranges, _ := f.FeedRanges(ctx)
	got, _ := readAll(t, f, ranges[0], "", 10)
	if len(got) != 1 || got[0].ID != "k" {
		t.Fatalf("feed = %+v, want only the document that has not expired", got)
	}
}
