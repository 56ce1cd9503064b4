package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// orderReader reads stored documents (order.ReadOrder reads an order with
// it); *cosmosstore.Store is one.
type orderReader interface {
	ReadDocument(ctx context.Context, pk, id string) ([]byte, string, error)
}

// show prints every dead-letter copy of message id; with a store, for an
// OrderIdReused copy the field-by-field diff with the stored order, for an
// OrderAccepted event (on a subscription) the stored order's status.
func (d *dlq) show(ctx context.Context, id string, store orderReader, w io.Writer) error {
	msgs, err := d.peekAll(ctx)
	if err != nil {
		return err
	}
	var copies []*azservicebus.ReceivedMessage
	for _, m := range msgs {
		if m.MessageID == id {
			copies = append(copies, m)
		}
	}
	if len(copies) == 0 {
		return fmt.Errorf("no message %s in %s (%d messages there)", id, d.name(), len(msgs))
	}
	now := d.now()
	for i, m := range copies {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "message %s in %s (copy %d of %d)\n", m.MessageID, d.name(), i+1, len(copies))
		field := func(k string, v any) { fmt.Fprintf(w, "  %-28s %v\n", k+":", v) }
		field("DeadLetterReason", reasonOf(m))
		field("DeadLetterErrorDescription", deref(m.DeadLetterErrorDescription))
		if m.DeadLetterSource != nil {
			field("DeadLetterSource", *m.DeadLetterSource)
		}
		field("SequenceNumber", seq(m))
		field("DeliveryCount", strconv.FormatUint(uint64(m.DeliveryCount), 10)+" (deliveries from the queue before dead-lettering, plus any from the dead-letter queue)")
		if t := enqueued(m); !t.IsZero() {
			field("EnqueuedTime", fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.RFC3339Nano), cli.FormatDuration(now.Sub(t).Round(time.Second))))
		}
		if f := firstEnqueued(m); !f.Equal(enqueued(m)) {
			field("first enqueued", f.UTC().Format(time.RFC3339Nano)+" (before its resubmissions)")
		}
		if m.ExpiresAt != nil {
			field("ExpiresAt", m.ExpiresAt.UTC().Format(time.RFC3339Nano))
		}
		if m.TimeToLive != nil {
			field("TimeToLive", cli.FormatDuration(*m.TimeToLive))
		}
		if m.Subject != nil {
			field("Subject", *m.Subject)
		}
		if m.ContentType != nil {
			field("ContentType", *m.ContentType)
		}
		if m.CorrelationID != nil {
			field("CorrelationID", *m.CorrelationID)
		}
		for _, k := range slices.Sorted(maps.Keys(m.ApplicationProperties)) {
			if k == propDeadLetterReason || k == propDeadLetterDescription {
				continue
			}
			field("property "+k, m.ApplicationProperties[k])
		}
		fmt.Fprintf(w, "  body (%d bytes):\n", len(m.Body))
		var pretty bytes.Buffer
		if json.Indent(&pretty, m.Body, "    ", "  ") == nil {
			fmt.Fprintf(w, "    %s\n", pretty.Bytes())
		} else {
			fmt.Fprintf(w, "    %q\n", m.Body)
		}
		ev, isEvent := acceptedEvent(m)
		switch {
		case deref(m.DeadLetterReason) == order.ReasonOrderIDReused:
			if store == nil {
				fmt.Fprintln(w, "  set COSMOS_ENDPOINT (-cosmos-endpoint) to compare it with the stored order")
				continue
			}
			if err := printDiff(ctx, w, store, m); err != nil {
				return err
			}
		case isEvent:
			if store == nil {
				fmt.Fprintln(w, "  set COSMOS_ENDPOINT (-cosmos-endpoint) to show the stored order's status")
				continue
			}
			if err := printOrderOfEvent(ctx, w, store, ev); err != nil {
				return err
			}
		}
	}
	return nil
}

// acceptedEvent decodes m as an OrderAccepted event, as the outbox relay
// publishes it: the event document as the JSON body (Subject = the event
// type, MessageId = the event id).
func acceptedEvent(m *azservicebus.ReceivedMessage) (order.AcceptedEvent, bool) {
	var ev order.AcceptedEvent
	if json.Unmarshal(m.Body, &ev) != nil || ev.EventType != order.EventOrderAccepted || ev.OrderID == "" {
		return ev, false
	}
	return ev, true
}

// printOrderOfEvent prints the status of the order an OrderAccepted event
// is about, and whether the stored order is the one the event announced.
func printOrderOfEvent(ctx context.Context, w io.Writer, store orderReader, ev order.AcceptedEvent) error {
	stored, err := order.ReadOrder(ctx, store, ev.OrderID)
	if errors.Is(err, idempotent.ErrNotFound) {
		fmt.Fprintf(w, "  no stored order %s: it was deleted since the event\n", ev.OrderID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the stored order %s: %w", ev.OrderID, err)
	}
	fmt.Fprintf(w, "  stored order %s: status %s version %d, created by message %s at %s\n",
		stored.OrderID, stored.Status, stored.Version, stored.MessageID, stored.ProcessedAt.UTC().Format(time.RFC3339))
	if ev.RequestHash != "" && stored.RequestHash != ev.RequestHash {
		fmt.Fprintf(w, "  the stored order's request hash %s is not the event's %s: the order was deleted and created again with other content since\n",
			stored.RequestHash, ev.RequestHash)
	}
	return nil
}

// printDiff prints the fields in which the dead-lettered order differs from
// the stored one.
func printDiff(ctx context.Context, w io.Writer, store orderReader, m *azservicebus.ReceivedMessage) error {
	body, err := order.Decode(m.Body)
	if err != nil {
		fmt.Fprintf(w, "  the body does not decode as an order, so it cannot be compared: %v\n", err)
		return nil
	}
	stored, err := order.ReadOrder(ctx, store, body.OrderID)
	if errors.Is(err, idempotent.ErrNotFound) {
		fmt.Fprintf(w, "  no stored order %s: it was deleted since\n", body.OrderID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the stored order %s: %w", body.OrderID, err)
	}
	fmt.Fprintf(w, "  stored order %s: created by message %s at %s, status %s version %d\n",
		stored.OrderID, stored.MessageID, stored.ProcessedAt.UTC().Format(time.RFC3339), stored.Status, stored.Version)
	diffs := diffOrder(stored, body)
	if len(diffs) == 0 {
		fmt.Fprintln(w, "  equal to the stored order (same request hash): a resubmission would be completed as a duplicate")
		return nil
	}
	fmt.Fprintf(w, "  %-28s %-30s %s\n", "FIELD", "STORED", "DEAD-LETTERED")
	for _, d := range diffs {
		fmt.Fprintf(w, "  %-28s %-30s %s\n", d.field, d.stored, d.message)
	}
	return nil
}

// fieldDiff is one field that differs.
type fieldDiff struct{ field, stored, message string }

// diffOrder compares the business fields the request hash covers, line by
// line, and the request hashes themselves.
func diffOrder(stored order.OrderDocument, m order.Order) []fieldDiff {
	var out []fieldDiff
	add := func(field string, a, b any) {
		sa, sb := fmt.Sprint(a), fmt.Sprint(b)
		if sa != sb {
			out = append(out, fieldDiff{field, sa, sb})
		}
	}
	add("customerId", stored.CustomerID, m.CustomerID)
	add("currency", stored.Currency, m.Currency)
	add("totalMinor", stored.TotalMinor, m.TotalMinor)
	add("placedAt", stored.PlacedAt.UTC().Format(time.RFC3339Nano), m.PlacedAt.UTC().Format(time.RFC3339Nano))
	add("len(lines)", len(stored.Lines), len(m.Lines))
	for i := range max(len(stored.Lines), len(m.Lines)) {
		var a, b order.Line
		absent := order.Line{SKU: "(absent)"}
		a, b = absent, absent
		if i < len(stored.Lines) {
			a = stored.Lines[i]
		}
		if i < len(m.Lines) {
			b = m.Lines[i]
		}
		add(fmt.Sprintf("lines[%d].sku", i), a.SKU, b.SKU)
		add(fmt.Sprintf("lines[%d].quantity", i), a.Quantity, b.Quantity)
		add(fmt.Sprintf("lines[%d].unitPriceMinor", i), a.UnitPriceMinor, b.UnitPriceMinor)
	}
	add("requestHash", stored.RequestHash, m.RequestHash())
	return out
}
