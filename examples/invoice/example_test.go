package invoice_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/idempotent-consumer/sbcosmos/examples/invoice"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

// The invoice consumer on the in-memory model of Cosmos DB: the first
// delivery creates the invoice and its event, a redelivery is a duplicate,
// and the same invoiceId with another amount is dead-lettered.
func Example() {
	ctx := context.Background()
	store := memstore.New("/invoiceId") // the container's partition key path is /invoiceId
	consumer := invoice.NewConsumer(store)

	m := idempotent.Message{ID: "inv-1", DeliveryCount: 1,
		Body: []byte(`{"invoiceId":"inv-1","customerId":"cust-42","currency":"EUR","amountMinor":1999,"issuedAt":"2026-11-30T10:00:00Z"}`)}
	fmt.Println(consumer.Process(ctx, m).Outcome)

	m.DeliveryCount = 2 // the lock expired before the settlement: Service Bus delivers it again
	fmt.Println(consumer.Process(ctx, m).Outcome)

	reused := idempotent.Message{ID: "inv-1", DeliveryCount: 1,
		Body: []byte(`{"invoiceId":"inv-1","customerId":"cust-42","currency":"EUR","amountMinor":2500,"issuedAt":"2026-11-30T10:00:00Z"}`)}
	r := consumer.Process(ctx, reused)
	fmt.Println(r.Outcome, r.Reason)

	for _, it := range store.Items() {
		fmt.Println(it.ID)
	}
	// Output:
	// created
	// duplicate
	// mismatch InvoiceIdReused
	// InvoiceIssued:inv-1
	// inv-1
}

// sender is a mail service client for the examples: it deduplicates on the
// key, as the real service does.
type sender struct{ sent map[string]string }

func (s *sender) SendInvoice(_ context.Context, key string, m invoice.Mail) (string, error) {
	if id, ok := s.sent[key]; ok {
		return id, nil // a key seen before: the first mail's id, nothing sent
	}
	s.sent[key] = fmt.Sprintf("msg-%d", len(s.sent)+1)
	fmt.Printf("mail %s to %s: %d %s (key %s)\n", s.sent[key], m.CustomerID, m.AmountMinor, m.Currency, key)
	return s.sent[key], nil
}

// The invoice consumer with its mail: the first delivery creates the
// invoice and mails it once, with a key stable per invoice; a redelivery
// is a duplicate and mails nothing.
func ExampleNewMailEffect() {
	ctx := context.Background()
	store := memstore.New("/invoiceId")
	mail := invoice.NewMailEffect(store, invoice.MailOptions{
		Mailer: &sender{sent: map[string]string{}},
		Lease:  time.Minute, // the queue's lock duration
		Owner:  "worker-1",
	})
	if err := mail.Err(); err != nil {
		fmt.Println(err)
		return
	}
	consumer := invoice.NewConsumer(store, idempotent.WithEffect(mail))

	m := idempotent.Message{ID: "inv-1", SequenceNumber: 1, DeliveryCount: 1,
		Body: []byte(`{"invoiceId":"inv-1","customerId":"cust-42","currency":"EUR","amountMinor":1999,"issuedAt":"2026-11-30T10:00:00Z"}`)}
	fmt.Println(consumer.Process(ctx, m).Outcome)
	m.DeliveryCount = 2
	fmt.Println(consumer.Process(ctx, m).Outcome)

	rec, _, _ := mail.Read(ctx, "inv-1")
	fmt.Println(rec.ID, rec.State, rec.Ref)
	// Output:
	// mail msg-1 to cust-42: 1999 EUR (key InvoiceMail:inv-1)
	// created
	// duplicate
	// InvoiceMail:inv-1 completed msg-1
}

// The invoice endpoint: a POST with the invoiceId as its Idempotency-Key
// creates the invoice and mails it; the same request again gets the stored
// response replayed; the key with another invoice is refused.
func ExampleNewHandler() {
	store := memstore.New("/invoiceId")
	mail := invoice.NewMailEffect(store, invoice.MailOptions{
		Mailer: &sender{sent: map[string]string{}},
		Lease:  time.Minute, // above the handler's timeout
		Owner:  "web-1",
	})
	h, err := invoice.NewHandler(store, invoice.HandlerOptions{Mail: mail, Timeout: 10 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	post := func(key, body string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/invoices", strings.NewReader(body))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		line := []string{resp.Status}
		for _, h := range []string{"Location", "Idempotent-Replayed", "Retry-After"} {
			if v := resp.Header.Get(h); v != "" {
				line = append(line, h+": "+v)
			}
		}
		fmt.Println(strings.Join(line, "; "))
		if resp.StatusCode < 300 {
			fmt.Printf("%s\n", b)
		}
	}
	invoice1 := `{"invoiceId":"inv-1","customerId":"cust-42","currency":"EUR","amountMinor":1999,"issuedAt":"2026-11-30T10:00:00Z"}`
	post(`"inv-1"`, invoice1)                                     // created and mailed
	post(`"inv-1"`, invoice1)                                     // a retry: replayed, not mailed again
	post(`"inv-1"`, strings.Replace(invoice1, "1999", "2500", 1)) // the key with another invoice
	post("", invoice1)                                            // no key
	// Output:
	// mail msg-1 to cust-42: 1999 EUR (key InvoiceMail:inv-1)
	// 201 Created; Location: /invoices/inv-1
	// {"invoiceId":"inv-1","customerId":"cust-42","currency":"EUR","amountMinor":1999,"issuedAt":"2026-11-30T10:00:00Z"}
	// 201 Created; Location: /invoices/inv-1; Idempotent-Replayed: true
	// {"invoiceId":"inv-1","customerId":"cust-42","currency":"EUR","amountMinor":1999,"issuedAt":"2026-11-30T10:00:00Z"}
	// 422 Unprocessable Entity
	// 400 Bad Request
}
