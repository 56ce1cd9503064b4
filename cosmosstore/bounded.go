package cosmosstore

import (
	"context"
	"reflect"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// bounded runs f, one call of the SDK, and returns its result, or ctx's
// error as soon as ctx ends, whichever comes first.
//
// azcosmos v1.5.0 does not always honour ctx: the call that finds the
// account's properties empty or stale (the first call of a client, every
// five minutes after, and after some errors) fetches them under
// context.WithoutCancel(ctx), bounded only by a 60-second timeout of its own
// (cosmos_global_endpoint_manager.go, runLeaderFlight and
// GetAccountProperties), so against an endpoint that does not answer, a call
// would outlive its deadline by up to a minute. bounded returns at the
// deadline instead and leaves f to finish in the background; f must record
// whatever it needs (the request charge) itself. A deadline that passes
// after a write was sent leaves its outcome unknown, as any timeout does:
// the error matches context.DeadlineExceeded and so is transient.
func bounded[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	if ctx.Done() == nil {
		return f(ctx)
	}
	c := getBoundedCall[T]()
	c.ctx, c.f = ctx, f
	sdkCalls.run(c.exec)
	select {
	case <-c.done:
		return c.result()
	case <-ctx.Done():
		select {
		case <-c.done: // finished at the same moment: keep its answer
			return c.result()
		default:
		}
		// c is left to the call, which still runs: never reused.
		var zero T
		return zero, context.Cause(ctx)
	}
}

// boundedCall is one call of bounded, reused through boundedPools once its
// result was taken, so that a call costs no channel and no closure of its
// own.
type boundedCall[T any] struct {
	ctx  context.Context
	f    func(context.Context) (T, error)
	done chan struct{} // buffered: exec never waits
	v    T
	err  error
	exec func() // run, bound once
}

func (c *boundedCall[T]) run() {
	c.v, c.err = c.f(c.ctx)
	c.done <- struct{}{} // the last touch of c: bounded may reuse it at once
}

// result returns c's result and gives c back to its pool.
func (c *boundedCall[T]) result() (T, error) {
	v, err := c.v, c.err
	var zero T
	c.ctx, c.f, c.v, c.err = nil, nil, zero, nil // hold nothing while pooled
	boundedPool[T]().Put(c)
	return v, err
}

// boundedPools holds a *sync.Pool of *boundedCall[T] per T.
var boundedPools sync.Map // reflect.Type -> *sync.Pool

// boundedPool returns the pool of *boundedCall[T].
func boundedPool[T any]() *sync.Pool {
	key := reflect.TypeFor[T]()
	if p, ok := boundedPools.Load(key); ok {
		return p.(*sync.Pool)
	}
	p, _ := boundedPools.LoadOrStore(key, &sync.Pool{New: func() any {
		c := &boundedCall[T]{done: make(chan struct{}, 1)}
		c.exec = c.run
		return c
	}})
	return p.(*sync.Pool)
}

func getBoundedCall[T any]() *boundedCall[T] { return boundedPool[T]().Get().(*boundedCall[T]) }

// sdkCalls runs the calls of bounded; a goroutine of it ends after 30 s
// without a call.
var sdkCalls = newCallPool(30 * time.Second)

// callPool runs functions on goroutines that outlive them: one that is
// idle takes the next function, and a function that finds none idle starts
// a goroutine of its own. A call of the SDK goes some forty frames deep
// (the azcore pipeline's policies, net/http), and a new goroutine's stack
// starts at the average size the collector last found, far smaller: on a
// fresh goroutine every call would grow its stack, copying it, three or
// four times. A goroutine that stays keeps its grown stack until the
// collector shrinks an idle one by half. A goroutine idle for the pool's
// wait ends, so a burst of calls leaves no goroutines behind for long. It
// is safe for concurrent use.
type callPool struct {
	idle chan func() // unbuffered: a send succeeds only when a goroutine waits
	wait time.Duration
}

// newCallPool returns a callPool whose goroutines end after wait without a
// function to run.
func newCallPool(wait time.Duration) *callPool {
	return &callPool{idle: make(chan func()), wait: wait}
}

// run runs f on a goroutine of the pool, at once: on an idle one, or on a
// new one.
func (p *callPool) run(f func()) {
	select {
	case p.idle <- f:
	default:
		go p.serve(f)
	}
}

// serve runs f, then every function handed to it, until none comes for
// p.wait.
func (p *callPool) serve(f func()) {
	t := time.NewTimer(p.wait)
	defer t.Stop()
	for {
		f()
		f = nil // hold nothing of the last call while idle
		t.Reset(p.wait)
		select {
		case f = <-p.idle:
		case <-t.C:
			return
		}
	}
}

// readItem reads one item, bounded by ctx, and counts its request charge.
// It sends the session token kept for pk, and each of these helpers keeps
// the session token of its response (see sessionTokens); a call that
// outlives ctx still records it when it ends.
func (s *Store) readItem(ctx context.Context, pk, id string) (azcosmos.ItemResponse, error) {
	return bounded(ctx, func(ctx context.Context) (azcosmos.ItemResponse, error) {
		var o *azcosmos.ItemOptions
		if tok := s.sessions.get(pk); tok != "" {
			o = &azcosmos.ItemOptions{SessionToken: &tok}
		}
		resp, err := s.containerFor(ctx).ReadItem(ctx, azcosmos.NewPartitionKeyString(pk), id, o)
		s.addCharge(itemCharge(resp, err))
		s.sessions.observe(pk, sessionTokenOf(resp.RawResponse, err))
		return resp, err
	})
}

// replaceItem replaces one item, bounded by ctx, and counts its request
// charge.
func (s *Store) replaceItem(ctx context.Context, pk, id string, body []byte, o *azcosmos.ItemOptions) (azcosmos.ItemResponse, error) {
	return bounded(ctx, func(ctx context.Context) (azcosmos.ItemResponse, error) {
		resp, err := s.containerFor(ctx).ReplaceItem(ctx, azcosmos.NewPartitionKeyString(pk), id, body, o)
		s.addCharge(itemCharge(resp, err))
		s.sessions.observe(pk, sessionTokenOf(resp.RawResponse, err))
		return resp, err
	})
}

// patchItem patches one item, bounded by ctx, and counts its request charge.
func (s *Store) patchItem(ctx context.Context, pk, id string, ops azcosmos.PatchOperations) (azcosmos.ItemResponse, error) {
	return bounded(ctx, func(ctx context.Context) (azcosmos.ItemResponse, error) {
		resp, err := s.containerFor(ctx).PatchItem(ctx, azcosmos.NewPartitionKeyString(pk), id, ops, nil)
		s.addCharge(itemCharge(resp, err))
		s.sessions.observe(pk, sessionTokenOf(resp.RawResponse, err))
		return resp, err
	})
}

// createItem creates one item, bounded by ctx, and counts its request charge.
func (s *Store) createItem(ctx context.Context, pk string, body []byte) (azcosmos.ItemResponse, error) {
	return bounded(ctx, func(ctx context.Context) (azcosmos.ItemResponse, error) {
		resp, err := s.containerFor(ctx).CreateItem(ctx, azcosmos.NewPartitionKeyString(pk), body, nil)
		s.addCharge(itemCharge(resp, err))
		s.sessions.observe(pk, sessionTokenOf(resp.RawResponse, err))
		return resp, err
	})
}

// deleteItem deletes one item, bounded by ctx, and counts its request charge.
func (s *Store) deleteItem(ctx context.Context, pk, id string) (azcosmos.ItemResponse, error) {
	return bounded(ctx, func(ctx context.Context) (azcosmos.ItemResponse, error) {
		resp, err := s.containerFor(ctx).DeleteItem(ctx, azcosmos.NewPartitionKeyString(pk), id, nil)
		s.addCharge(itemCharge(resp, err))
		s.sessions.observe(pk, sessionTokenOf(resp.RawResponse, err))
		return resp, err
	})
}

// executeBatch executes a transactional batch on partition pk, bounded by
// ctx, with the session token kept for pk, and counts its request charge.
func (s *Store) executeBatch(ctx context.Context, pk string, b azcosmos.TransactionalBatch) (azcosmos.TransactionalBatchResponse, error) {
	return bounded(ctx, func(ctx context.Context) (azcosmos.TransactionalBatchResponse, error) {
		var o *azcosmos.TransactionalBatchOptions
		if tok := s.sessions.get(pk); tok != "" {
			o = &azcosmos.TransactionalBatchOptions{SessionToken: tok}
		}
		resp, err := s.containerFor(ctx).ExecuteTransactionalBatch(ctx, b, o)
		s.addCharge(batchCharge(resp, err))
		s.sessions.observe(pk, sessionTokenOf(resp.RawResponse, err))
		return resp, err
	})
}
