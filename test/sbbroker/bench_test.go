package sbbroker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// BenchmarkThroughput measures the SDK round trip through the broker per
// message: batched send, PeekLock receive in batches of up to 100, and one
// complete per message.
func BenchmarkThroughput(b *testing.B) {
	f := newFixture(b, sbqueue.QueueOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s, err := f.client.NewSender(queueName, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(ctx)
	r, err := f.client.NewReceiverForQueue(queueName, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close(ctx)
	body := []byte(`{"orderId":"ord-000001","customerId":"c-1","items":[{"sku":"A-1","qty":2}]}`)

	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for sent := 0; sent < b.N; {
		batch, err := s.NewMessageBatch(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		for ; sent < b.N && batch.NumMessages() < 100; sent++ {
			id := fmt.Sprintf("m-%d", sent)
			if err := batch.AddMessage(&azservicebus.Message{MessageID: &id, Body: body}, nil); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.SendMessageBatch(ctx, batch, nil); err != nil {
			b.Fatal(err)
		}
	}
	for done := 0; done < b.N; {
		ms, err := r.ReceiveMessages(ctx, min(100, b.N-done), nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range ms {
			if err := r.CompleteMessage(ctx, m, nil); err != nil {
				b.Fatal(err)
			}
		}
		done += len(ms)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}
