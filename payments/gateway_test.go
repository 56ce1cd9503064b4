package payments_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/order"
	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
)

func TestGatewayMapsErrorsToTheDomain(t *testing.T) {
	tests := []struct {
		name  string
		fault paymentservice.Fault
		want  error // nil: success
	}{
		{"captured", paymentservice.Fault{}, nil},
		{"service unavailable", paymentservice.Fault{Kind: paymentservice.FaultFail, Status: http.StatusServiceUnavailable}, idempotent.ErrTransient},
		{"throttled", paymentservice.Fault{Kind: paymentservice.FaultFail, Status: http.StatusTooManyRequests}, idempotent.ErrTransient},
		{"rejected", paymentservice.Fault{Kind: paymentservice.FaultFail, Status: http.StatusBadRequest}, order.ErrPaymentRejected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := paymentservice.NewService(&paymentservice.ServiceOptions{Faults: func(paymentservice.FaultRequest) paymentservice.Fault { return tt.fault }})
			srv := httptest.NewServer(svc)
			defer srv.Close()
			c, err := payments.NewClient(srv.URL, &payments.ClientOptions{MaxAttempts: 1})
			if err != nil {
				t.Fatal(err)
			}
			id, err := payments.Gateway{Client: c}.Capture(context.Background(), order.PaymentKey("ord-1"),
				order.Capture{OrderID: "ord-1", AmountMinor: 100, Currency: "EUR"})
			if tt.want == nil {
				if err != nil || id == "" {
					t.Fatalf("Capture = %q, %v", id, err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Capture error %v does not match %v", err, tt.want)
			}
		})
	}
}

func TestGatewayKeyReusedIsRejected(t *testing.T) {
	srv := httptest.NewServer(paymentservice.NewService(nil))
	defer srv.Close()
	c, _ := payments.NewClient(srv.URL, nil)
	g := payments.Gateway{Client: c}
	ctx := context.Background()
	if _, err := g.Capture(ctx, "k", order.Capture{OrderID: "ord-1", AmountMinor: 100, Currency: "EUR"}); err != nil {
		t.Fatal(err)
	}
	_, err := g.Capture(ctx, "k", order.Capture{OrderID: "ord-1", AmountMinor: 200, Currency: "EUR"})
	if !errors.Is(err, order.ErrPaymentRejected) {
		t.Errorf("a key reused for another amount: %v, want ErrPaymentRejected", err)
	}
}
