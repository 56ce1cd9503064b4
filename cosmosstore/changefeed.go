package cosmosstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// The change feed calls, as Error.Op names them.
const (
	opReadFeedRanges = "read feed ranges"
	opReadChangeFeed = "read change feed"
)

// ChangeFeed reads the change feed of the store's container in latest
// version mode, one feed range at a time, with azcosmos v1.5.0's
// ContainerClient.ReadFeedRanges and ReadChangeFeed. It implements the
// interface relay.ChangeFeed names. It is safe for concurrent use.
//
// A feed range is named "MIN-MAX", its effective partition key bounds as
// Cosmos DB reports them (hexadecimal; the first range's MIN is empty, so a
// container with one physical partition has the one range "-FF"). A
// continuation is the SDK's composite continuation token, passed back to
// the SDK as it is: on a partition split the SDK carries a parent range's
// token on through its children, so a range named before a split keeps
// covering the same partition key values. On the wire each read is a GET of
// the container's documents with A-IM: Incremental Feed, the physical range
// in x-ms-documentdb-partitionkeyrangeid and the range's last ETag in
// If-None-Match; the service answers 304 Not Modified when nothing changed,
// which ReadChanges returns as no documents and the same continuation.
//
// Cosmos DB orders the changes of one partition key value, not across
// values; each document appears once per read, in its latest version.
//
// The change feed reads go at the client's priority (ClientOptions'
// PriorityLevel; none set means High, Cosmos DB's default) unless
// LowPriority is used.
type ChangeFeed struct {
	s        *Store
	priority *azcosmos.PriorityLevel // of each change feed read; nil: the client's
}

// ChangeFeed returns the change feed of s's container.
func (s *Store) ChangeFeed() *ChangeFeed { return &ChangeFeed{s: s} }

// LowPriority returns f with every change feed read (ReadChanges) marked
// low priority: azcosmos v1.5.0's ChangeFeedOptions.PriorityLevel, which
// sends the header x-ms-cosmos-priority-level: Low. On an account with
// priority-based execution enabled, when the container's provisioned
// throughput is exhausted, Cosmos DB throttles (429) low-priority requests
// before high-priority ones, so a relay catching up on a backlog yields to
// the worker's batches and reads, which stay High. Where the feature is not
// enabled the header has no effect. FeedRanges is unchanged: it reads the
// container's partition key ranges, metadata whose request options carry no
// priority in the SDK. The Store and its other calls are unaffected; f
// itself is unchanged, and both are safe for concurrent use.
func (f *ChangeFeed) LowPriority() *ChangeFeed {
	low := azcosmos.PriorityLevelLow
	return &ChangeFeed{s: f.s, priority: &low}
}

// Priority returns the priority level f's change feed reads carry, or ""
// when they carry none of their own (the client's default, High unless the
// client sets another).
func (f *ChangeFeed) Priority() azcosmos.PriorityLevel {
	if f.priority == nil {
		return ""
	}
	return *f.priority
}

// FeedRanges returns the container's current feed ranges.
func (f *ChangeFeed) FeedRanges(ctx context.Context) ([]string, error) {
	ranges, err := bounded(ctx, func(ctx context.Context) ([]azcosmos.FeedRange, error) {
		return f.s.container.ReadFeedRanges(ctx, nil)
	})
	if err != nil {
		return nil, classify(opReadFeedRanges, "", err)
	}
	out := make([]string, len(ranges))
	for i, r := range ranges {
		if strings.Contains(r.MinInclusive, "-") || strings.Contains(r.MaxExclusive, "-") {
			return nil, &Error{Op: opReadFeedRanges, Index: -1, Err: fmt.Errorf("feed range bounds %q, %q are not hexadecimal", r.MinInclusive, r.MaxExclusive)}
		}
		out[i] = r.MinInclusive + "-" + r.MaxExclusive
	}
	return out, nil
}

// ReadChanges returns up to maxItems documents of feed range name changed
// after continuation ("" is the beginning of the container's feed), and the
// continuation that follows them. A continuation that is not one the SDK
// issued is refused, where the SDK would silently start the range over. An
// *Error reports a failed read, matching idempotent.ErrTransient for 429, 503,
// 408 and lost connections (the store's mapping of status codes).
func (f *ChangeFeed) ReadChanges(ctx context.Context, name, continuation string, maxItems int) ([][]byte, string, error) {
	lo, hi, ok := strings.Cut(name, "-")
	if !ok {
		return nil, "", &Error{Op: opReadChangeFeed, PartitionKey: name, Index: -1, Err: fmt.Errorf("feed range %q is not MIN-MAX", name)}
	}
	o := &azcosmos.ChangeFeedOptions{FeedRange: &azcosmos.FeedRange{MinInclusive: lo, MaxExclusive: hi}, PriorityLevel: f.priority}
	if maxItems > 0 {
		o.MaxItemCount = int32(min(maxItems, math.MaxInt32))
	}
	if continuation != "" {
		if err := checkContinuation(continuation); err != nil {
			return nil, "", &Error{Op: opReadChangeFeed, PartitionKey: name, Index: -1, Err: err}
		}
		o.Continuation = &continuation
	}
	resp, err := bounded(ctx, func(ctx context.Context) (azcosmos.ChangeFeedResponse, error) {
		resp, err := f.s.container.ReadChangeFeed(ctx, o)
		f.s.addCharge(float64(resp.RequestCharge))
		return resp, err
	})
	if err != nil {
		return nil, "", classify(opReadChangeFeed, name, err)
	}
	next := resp.ContinuationToken
	if next == "" {
		if len(resp.Items) > 0 {
			return nil, "", &Error{Op: opReadChangeFeed, PartitionKey: name, Index: -1, ActivityID: resp.ActivityID,
				Err: fmt.Errorf("%d changes and no continuation token", len(resp.Items))}
		}
		next = continuation
	}
	return resp.Items, next, nil
}

// checkContinuation refuses a string that is not a composite continuation
// token of azcosmos v1.5.0 ({"version":1,"resourceId":…,"continuation":[…]}).
func checkContinuation(c string) error {
	var t struct {
		Continuation []json.RawMessage `json:"continuation"`
	}
	if err := json.Unmarshal([]byte(c), &t); err != nil || len(t.Continuation) == 0 {
		return errors.New("the continuation is not a change feed continuation token the SDK issued")
	}
	return nil
}
