// Package bareloop is the floor the orderworker binary is measured against
// (BenchmarkBinaryCPU in test/bench): the least a PeekLock consumer of the
// orders queue does with the unmodified azservicebus and azcosmos SDKs to
// make the same calls as the worker. Per message: decode the body, marshal
// the order document and its OrderAccepted event (the project's document
// shapes, with a SHA-256 of the body as the request hash: no validation, no
// canonical encoding), one transactional batch; on a conflict a point read
// and a compare of the stored hash; then complete the message. No deadline
// per message, no lock renewal, no logging, no telemetry, no health server.
//
// Run is its receive loop, with the worker's concurrency semantics (see
// package worker, Pipeline): one goroutine receives, asking for as many
// messages as there are free handler slots (at least one); a handler slot is
// held from the receive to the end of the message's processing and given
// back before its settlement, after the settlement slot (at most
// concurrency settlements at once) is taken. Nothing here is production
// code.
package bareloop

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// Docs are what the bare loop writes for one message: the order document
// and its event, marshalled, and the request hash they carry.
type Docs struct {
	OrderID      string
	Hash         string
	Order, Event []byte
}

// NewDocs decodes body (an order message) and marshals its documents.
func NewDocs(messageID string, body []byte) (Docs, error) {
	var o order.Order
	if err := json.Unmarshal(body, &o); err != nil {
		return Docs{}, err
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	now := time.Now().UTC()
	doc, err := json.Marshal(order.OrderDocument{
		ID: o.OrderID, OrderID: o.OrderID, Type: order.TypeOrder, CustomerID: o.CustomerID, Currency: o.Currency,
		Lines: o.Lines, TotalMinor: o.TotalMinor, PlacedAt: o.PlacedAt, Status: "accepted", Version: 1,
		RequestHash: hash, MessageID: messageID, ProcessedAt: now,
	})
	if err != nil {
		return Docs{}, err
	}
	ev, err := json.Marshal(order.AcceptedEvent{
		ID: order.EventID(o.OrderID), OrderID: o.OrderID, Type: order.TypeEvent, EventType: order.EventOrderAccepted,
		CustomerID: o.CustomerID, Currency: o.Currency, TotalMinor: o.TotalMinor, RequestHash: hash, OccurredAt: now,
	})
	if err != nil {
		return Docs{}, err
	}
	return Docs{OrderID: o.OrderID, Hash: hash, Order: doc, Event: ev}, nil
}

// Handle stores the order of one message on c: one transactional batch; on
// a conflict a point read and a compare of the stored request hash. It
// reports whether the order was stored before (a duplicate). It is safe for
// concurrent use.
func Handle(ctx context.Context, c *azcosmos.ContainerClient, messageID string, body []byte) (duplicate bool, err error) {
	d, err := NewDocs(messageID, body)
	if err != nil {
		return false, err
	}
	b := c.NewTransactionalBatch(azcosmos.NewPartitionKeyString(d.OrderID))
	b.CreateItem(d.Order, nil)
	b.CreateItem(d.Event, nil)
	resp, err := c.ExecuteTransactionalBatch(ctx, b, nil)
	if err != nil {
		return false, err
	}
	// Cosmos DB answers a conflicting batch with Success false and the 409
	// on the operation; cosmium says Success with the 409 inside, so the
	// operations' codes decide.
	conflict := false
	for _, r := range resp.OperationResults {
		if r.StatusCode == http.StatusConflict {
			conflict = true
		}
	}
	if !conflict {
		if !resp.Success {
			return false, fmt.Errorf("batch of order %s failed: %+v", d.OrderID, resp.OperationResults)
		}
		return false, nil
	}
	read, err := c.ReadItem(ctx, azcosmos.NewPartitionKeyString(d.OrderID), d.OrderID, nil)
	if err != nil {
		return false, err
	}
	var stored struct {
		RequestHash string `json:"requestHash"`
	}
	if err := json.Unmarshal(read.Value, &stored); err != nil {
		return false, err
	}
	if stored.RequestHash != d.Hash {
		return false, fmt.Errorf("order %s exists with another request hash", d.OrderID)
	}
	return true, nil
}

// Receiver is what Run needs of an azservicebus.Receiver.
type Receiver interface {
	ReceiveMessages(ctx context.Context, maxMessages int, options *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	CompleteMessage(ctx context.Context, message *azservicebus.ReceivedMessage, options *azservicebus.CompleteMessageOptions) error
	AbandonMessage(ctx context.Context, message *azservicebus.ReceivedMessage, options *azservicebus.AbandonMessageOptions) error
}

// Counts are what Run did.
type Counts struct {
	Created, Duplicate, Failed int64
}

// Run receives from r and handles each message with handle, by at most
// concurrency at once, completing it when handle succeeds and abandoning
// it when it fails, until ctx ends; then it waits for the messages in
// flight (handled and settled with a context of their own) and returns what
// it did. A receive that fails for another reason than ctx ending ends Run
// with its error.
func Run(ctx context.Context, r Receiver, concurrency int, handle func(ctx context.Context, m *azservicebus.ReceivedMessage) (duplicate bool, err error)) (Counts, error) {
	if concurrency < 1 {
		return Counts{}, errors.New("bareloop: concurrency must be at least 1")
	}
	handlers := make(chan struct{}, concurrency)
	settles := make(chan struct{}, concurrency)
	var created, dup, failed atomic.Int64
	var wg sync.WaitGroup
	var err error
	work := context.WithoutCancel(ctx)
	for ctx.Err() == nil {
		select {
		case handlers <- struct{}{}: // one free handler at least
		case <-ctx.Done():
			continue
		}
		n := 1
	free:
		for n < concurrency {
			select {
			case handlers <- struct{}{}:
				n++
			default:
				break free
			}
		}
		ms, rerr := r.ReceiveMessages(ctx, n, nil)
		for range n - len(ms) {
			<-handlers
		}
		if rerr != nil {
			if ctx.Err() == nil {
				err = fmt.Errorf("bareloop: receive: %w", rerr)
			}
			break
		}
		for _, m := range ms {
			wg.Go(func() {
				isDup, herr := handle(work, m)
				settles <- struct{}{}
				<-handlers
				defer func() { <-settles }()
				if herr != nil {
					failed.Add(1)
					_ = r.AbandonMessage(work, m, nil)
					return
				}
				if serr := r.CompleteMessage(work, m, nil); serr != nil {
					failed.Add(1)
					return
				}
				if isDup {
					dup.Add(1)
				} else {
					created.Add(1)
				}
			})
		}
	}
	wg.Wait()
	return Counts{Created: created.Load(), Duplicate: dup.Load(), Failed: failed.Load()}, err
}
