package relay

import (
	"encoding/json"
	"time"
)

// Hooks are functions the relay calls as it works, so that a command can
// keep metrics and health without the relay knowing of either. A nil field
// is not called; the zero Hooks costs nothing. Every hook is called from the
// goroutine that drives the relay (Run, or the caller of Step), must return
// quickly, and must not call the Relay.
type Hooks struct {
	// Published is called after each batch the topic accepted, with the
	// feed range it came from and the number of events it carried
	// (republished ones included, as Stats.Published counts them).
	Published func(feedRange string, events int)
	// Read is called after each successful read of a feed range this
	// instance holds, with how far the relay is behind the feed there: 0
	// when the page was not full (the relay has read to the end of the feed
	// as it stands, and publishes it now), else the age of the newest
	// change in the full page (by its _ts, or its Options.Events.TimeField
	// when the store sets no _ts): the backlog is at least that old. A
	// full page whose documents carry neither time is not reported.
	Read func(feedRange string, lag time.Duration)
	// Acquired is called when this instance acquires the lease of a feed
	// range. previousOwner is the instance that held it last: "" for a
	// free lease (released at shutdown, or new), this instance's Owner for
	// its own lease from an earlier run, another name for a lease
	// reclaimed after it expired (its owner crashed or stalled), which
	// reclaimed reports (and Stats.Reclaimed counts).
	Acquired func(feedRange, previousOwner string, reclaimed bool)
	// Lost is called when this instance finds that another holds a lease
	// it held (counted in Stats.Lost).
	Lost func(feedRange string)
	// Stepped is called after each poll of every feed range (each Step).
	Stepped func(StepReport)
}

// StepReport is what one poll of the feed ranges found.
type StepReport struct {
	// Ranges is the number of feed ranges in the relay's manifest; 0 when
	// the manifest could not be read or written.
	Ranges int
	// Owned are the feed ranges whose leases this instance holds after
	// the step.
	Owned []string
	// Waiting is the number of feed ranges whose lease another instance
	// holds and has not let expire: this instance waits for them.
	Waiting int
	// Err holds the errors the step met (each also logged); nil when every
	// range was read, published and checkpointed, or is another's.
	Err error
}

// changeTime is the time of a change feed document: its _ts (seconds, set
// by Cosmos DB) or, failing that, its timeField (RFC 3339).
func changeTime(doc []byte, timeField string) (time.Time, bool) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(doc, &fields) != nil {
		return time.Time{}, false
	}
	var ts int64
	if json.Unmarshal(fields["_ts"], &ts) == nil && ts > 0 {
		return time.Unix(ts, 0), true
	}
	var at time.Time
	if raw, ok := fields[timeField]; ok && json.Unmarshal(raw, &at) == nil && !at.IsZero() {
		return at, true
	}
	return time.Time{}, false
}

// lag returns how long ago the newest of docs changed, by now; false when
// none carries a time.
func lag(docs [][]byte, timeField string, now time.Time) (time.Duration, bool) {
	var newest time.Time
	found := false
	for _, doc := range docs {
		if t, ok := changeTime(doc, timeField); ok && (!found || t.After(newest)) {
			newest, found = t, true
		}
	}
	if !found {
		return 0, false
	}
	return max(now.Sub(newest), 0), true
}
