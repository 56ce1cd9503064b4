package cosmosstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
	"github.com/idempotent-consumer/sbcosmos/order"
)

// PartitionKeyPath is the partition key path of the orders container: every
// document of an order has the order id in its orderId field.
const PartitionKeyPath = "/orderId"

// The store calls, as Error.Op names them.
const (
	opCreate = "create order"
	opRead   = "read order"
)

// Cosmos DB response headers the store reads.
const (
	headerRequestCharge = "x-ms-request-charge"
	headerActivityID    = "x-ms-activity-id"
	headerSubStatus     = "x-ms-substatus"
)

// Store is an order.Store on one Cosmos DB container. It is safe for
// concurrent use.
type Store struct {
	container *azcosmos.ContainerClient
	charge    atomic.Uint64 // math.Float64bits of the request units charged so far
}

var _ order.Store = (*Store)(nil)

// New returns a Store on the container named container in the database named
// database. It makes no request: a missing database or container shows up as
// a permanent error of the first call.
func New(c *azcosmos.Client, database, container string) (*Store, error) {
	if c == nil {
		return nil, errors.New("cosmosstore: New needs a client")
	}
	cc, err := c.NewContainer(database, container)
	if err != nil {
		return nil, fmt.Errorf("cosmosstore: container %q in database %q: %w", container, database, err)
	}
	return &Store{container: cc}, nil
}

// CreateOrder writes the order document and its OrderAccepted event in one
// transactional batch under the partition key value w.PartitionKey(): both or
// neither. If the order exists it writes nothing and returns an *Error that
// matches order.ErrAlreadyExists. Concurrent calls for the same order are
// safe: exactly one of them writes.
func (s *Store) CreateOrder(ctx context.Context, w order.Write) error {
	orderID := w.PartitionKey()
	docs, err := w.Documents()
	if err != nil {
		return &Error{Op: opCreate, OrderID: orderID, Index: -1, Err: err}
	}
	batch := s.container.NewTransactionalBatch(azcosmos.NewPartitionKeyString(orderID))
	for _, d := range docs {
		batch.CreateItem(d.Body, nil)
	}
	resp, err := s.container.ExecuteTransactionalBatch(ctx, batch, nil)
	s.addCharge(batchCharge(resp, err))
	if err != nil {
		return classify(opCreate, orderID, err)
	}
	r := batchResult{
		HTTPStatus:  resp.RawResponse.StatusCode,
		Success:     resp.Success,
		StatusCodes: make([]int, len(resp.OperationResults)),
		ActivityID:  resp.ActivityID,
	}
	for i, op := range resp.OperationResults {
		r.StatusCodes[i] = int(op.StatusCode)
	}
	return interpretBatch(orderID, len(docs), r)
}

// ReadOrder returns the order document of orderID, or an *Error that matches
// order.ErrNotFound if there is none.
func (s *Store) ReadOrder(ctx context.Context, orderID string) (order.OrderDocument, error) {
	resp, err := s.container.ReadItem(ctx, azcosmos.NewPartitionKeyString(orderID), orderID, nil)
	s.addCharge(itemCharge(resp, err))
	if err != nil {
		return order.OrderDocument{}, classify(opRead, orderID, err)
	}
	var doc order.OrderDocument
	if err := json.Unmarshal(resp.Value, &doc); err != nil {
		return order.OrderDocument{}, &Error{Op: opRead, OrderID: orderID, Index: -1, ActivityID: resp.ActivityID,
			Err: fmt.Errorf("decode the stored document: %w", err)}
	}
	if doc.Type != order.TypeOrder || doc.OrderID != orderID {
		return order.OrderDocument{}, &Error{Op: opRead, OrderID: orderID, Index: -1, ActivityID: resp.ActivityID,
			Err: fmt.Errorf("stored document is not the order (type %q, orderId %q)", doc.Type, doc.OrderID)}
	}
	return doc, nil
}

// RequestCharge returns the request units (RU) that Cosmos DB has charged for
// the store's calls so far, failed calls included, as the x-ms-request-charge
// response headers report them. It is safe to call concurrently with the
// other methods; the worker reports differences between two calls.
func (s *Store) RequestCharge() float64 {
	return math.Float64frombits(s.charge.Load())
}

func (s *Store) addCharge(ru float64) {
	if ru <= 0 {
		return
	}
	for {
		old := s.charge.Load()
		if s.charge.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+ru)) {
			return
		}
	}
}

// batchCharge returns the request charge of a transactional batch: the
// response header, or else the sum of the operations' charges.
func batchCharge(resp azcosmos.TransactionalBatchResponse, err error) float64 {
	if ru := headerCharge(resp.RawResponse, err); ru > 0 {
		return ru
	}
	var sum float64
	for _, op := range resp.OperationResults {
		sum += float64(op.RequestCharge)
	}
	return sum
}

func itemCharge(resp azcosmos.ItemResponse, err error) float64 {
	return headerCharge(resp.RawResponse, err)
}

// headerCharge reads the x-ms-request-charge header of a response, or of the
// response carried by an *azcore.ResponseError.
func headerCharge(resp *http.Response, err error) float64 {
	var re *azcore.ResponseError
	if resp == nil && errors.As(err, &re) {
		resp = re.RawResponse
	}
	if resp == nil {
		return 0
	}
	ru, perr := strconv.ParseFloat(resp.Header.Get(headerRequestCharge), 64)
	if perr != nil || math.IsNaN(ru) || math.IsInf(ru, 0) {
		return 0
	}
	return ru
}
