package sbqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// BenchmarkSendReceiveComplete measures one message's round trip through
// the model: send, receive (lock), complete.
func BenchmarkSendReceiveComplete(b *testing.B) {
	for _, tc := range []struct {
		name string
		opts sbqueue.QueueOptions
	}{
		{"plain", sbqueue.QueueOptions{}},
		{"dedup+ttl", sbqueue.QueueOptions{RequiresDuplicateDetection: true, DefaultMessageTimeToLive: time.Hour}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			q, clock := newTestQueue(b, tc.opts)
			ctx := context.Background()
			body := []byte(`{"orderId":"order-1","amount":100}`)
			b.ReportAllocs()
			for b.Loop() {
				clock.Advance(time.Millisecond)
				if _, err := q.Send(ctx, sbqueue.Message{Body: body}); err != nil {
					b.Fatal(err)
				}
				msgs, err := q.Receive(ctx, 1)
				if err != nil {
					b.Fatal(err)
				}
				if err := q.Complete(msgs[0].LockToken); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReceiverParallel measures the same round trip through the
// worker-facing Receiver, with competing goroutines each holding one
// message locked at a time.
func BenchmarkReceiverParallel(b *testing.B) {
	q, _ := newTestQueue(b, sbqueue.QueueOptions{})
	ctx := context.Background()
	body := []byte(`{"orderId":"order-1","amount":100}`)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := q.NewReceiver()
		for pb.Next() {
			if _, err := q.Send(ctx, sbqueue.Message{Body: body}); err != nil {
				b.Fatal(err)
			}
			msgs, err := r.ReceiveMessages(ctx, 1, nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := r.CompleteMessage(ctx, msgs[0], nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
