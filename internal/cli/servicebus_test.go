package cli_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
)

// TestServiceBusClientGivesUpAfterItsRetries: against an endpoint that
// accepts TCP connections and closes them at once (a broker that is not
// there), a receive fails after the first try and RetryOptions.MaxRetries
// retries, with the connection error, instead of the SDK's default of four
// tries spread over about 40 s in which nothing is logged.
func TestServiceBusClientGivesUpAfterItsRetries(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var dials atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			c.Close()
		}
	}()
	client, err := cli.NewServiceBusClient("", "Endpoint=sb://"+l.Addr().String()+";SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true;")
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	r, err := client.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err = r.ReceiveMessages(ctx, 1, nil)
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReceiveMessages = %v, want the connection error", err)
	}
	if got, want := dials.Load(), int64(cli.RetryOptions.MaxRetries+1); got != want {
		t.Errorf("%d connection attempts, want %d (one try and %d retries)", got, want, cli.RetryOptions.MaxRetries)
	}
}
