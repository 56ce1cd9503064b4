package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// The relay's lease documents, as package relay writes them (relay.Lease,
// relay.Manifest, relay.LeaseID, relay.ManifestID; the package's tests
// hold the two to the same format). They are restated here because relay
// links the Service Bus SDK and this package links no Azure SDK.
const (
	typeLease = "lease"
)

func manifestID(name string) string         { return "lease:" + name }
func leaseID(name, feedRange string) string { return "lease:" + name + ":" + feedRange }

type manifestDoc struct {
	FeedRanges []string `json:"feedRanges"`
}

type leaseDoc struct {
	ID             string    `json:"id"`
	Type           string    `json:"type"`
	Relay          string    `json:"relay"`
	FeedRange      string    `json:"feedRange"`
	Owner          string    `json:"owner"`
	ExpiresAt      time.Time `json:"expiresAt"`
	Continuation   string    `json:"continuation"`
	CheckpointedAt time.Time `json:"checkpointedAt"`
}

// checkRelays checks every configured relay's manifest and leases: each
// feed range has a lease naming its relay and range, no range is held by
// two relays, and no event after a checkpoint is older than MaxRelayLag.
// It reads one manifest and one lease per feed range, and the feed after
// each checkpoint a page at a time.
func (a *auditor) checkRelays(ctx context.Context) error {
	type holder struct{ relay, lease string }
	held := map[string]holder{} // feed range -> the relay holding it now
	for _, name := range a.cfg.Relays {
		id := manifestID(name)
		body, _, err := a.cfg.Leases.ReadDocument(ctx, id, id)
		switch {
		case errors.Is(err, idempotent.ErrNotFound):
			a.checked(RelayLease)
			a.violate(RelayLease, id, "relay %s has no manifest: it never ran against this container, so no event is published", name)
			continue
		case err != nil:
			return fmt.Errorf("audit: read relay %s's manifest: %w", name, err)
		}
		var m manifestDoc
		if err := json.Unmarshal(body, &m); err != nil || len(m.FeedRanges) == 0 {
			a.checked(RelayLease)
			a.violate(RelayLease, id, "relay %s's manifest is not one with feed ranges (%v)", name, err)
			continue
		}
		for _, fr := range m.FeedRanges {
			lid := leaseID(name, fr)
			a.checked(RelayLease)
			body, _, err := a.cfg.Leases.ReadDocument(ctx, lid, lid)
			switch {
			case errors.Is(err, idempotent.ErrNotFound):
				a.violate(RelayLease, lid, "relay %s has no lease for feed range %s: the range was never published", name, fr)
				continue
			case err != nil:
				return fmt.Errorf("audit: read lease %s: %w", lid, err)
			}
			var l leaseDoc
			if err := json.Unmarshal(body, &l); err != nil || l.Type != typeLease || l.Relay != name || l.FeedRange != fr {
				a.violate(RelayLease, lid, "lease does not decode as relay %s's lease of range %s (type %q, relay %q, range %q, %v)", name, fr, l.Type, l.Relay, l.FeedRange, err)
				continue
			}
			if l.Owner != "" && a.now.Before(l.ExpiresAt) {
				if h, ok := held[fr]; ok && h.relay != name {
					a.violate(RelayLease, lid, "feed range %s is held by relay %s (lease %s) and by relay %s (owner %s) at once: both publish every event of it", fr, h.relay, h.lease, name, l.Owner)
				} else {
					held[fr] = holder{relay: name, lease: lid}
				}
			}
			if err := a.lag(ctx, l); err != nil {
				return err
			}
		}
	}
	return nil
}

// lag checks that the feed after lease l's checkpoint holds no event older
// than MaxRelayLag.
func (a *auditor) lag(ctx context.Context, l leaseDoc) error {
	a.checked(RelayLag)
	token := l.Continuation
	for {
		docs, next, err := a.cfg.Feed.ReadChanges(ctx, l.FeedRange, token, a.cfg.PageSize)
		if err != nil {
			return fmt.Errorf("audit: read the change feed after lease %s's checkpoint: %w", l.ID, err)
		}
		if len(docs) == 0 {
			return nil
		}
		for _, d := range docs {
			var e struct {
				head
				OccurredAt time.Time `json:"occurredAt"`
			}
			if json.Unmarshal(d, &e) != nil || e.Type != order.TypeEvent {
				continue
			}
			at := e.OccurredAt
			if at.IsZero() && e.TS > 0 {
				at = time.Unix(e.TS, 0)
			}
			if age := a.now.Sub(at); age > a.cfg.MaxRelayLag {
				a.violate(RelayLag, l.ID, "event %s, written %s ago, is after the checkpoint of %s (checkpointed %s): the relay is more than %v behind",
					e.ID, age.Round(time.Second), l.ID, l.CheckpointedAt.Format(time.RFC3339), a.cfg.MaxRelayLag)
				return nil
			}
		}
		token = next
	}
}
