package cli_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
)

// TestExplainServiceBusOnTheTestBroker makes the three start-up failures
// happen on the test broker (a missing queue, a wrong key, a closed port)
// and checks that the explanation names the setting to fix, keeps the
// SDK's error code, and never shows the key.
func TestExplainServiceBusOnTheTestBroker(t *testing.T) {
	ns := sbqueue.NewNamespace(sbqueue.RealClock())
	if _, err := ns.CreateQueue("orders", sbqueue.QueueOptions{}); err != nil {
		t.Fatal(err)
	}
	b := sbbroker.New(ns, sbbroker.Options{})
	if err := b.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	cs := func(addr, key string) string {
		return "Endpoint=sb://" + addr + ";SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=" + key + ";UseDevelopmentEmulator=true;"
	}
	tests := []struct {
		name     string
		connStr  string
		queue    string
		wantCode azservicebus.Code
		want     []string
	}{
		{"missing queue", cs(b.Addr().String(), sbbroker.DefaultKey), "ordres", azservicebus.CodeNotFound,
			[]string{`queue "ordres" does not exist in the broker at ` + b.Addr().String(), "set SERVICEBUS_QUEUE (-queue)"}},
		{"wrong key", cs(b.Addr().String(), "WRONGKEY"), "orders", azservicebus.CodeUnauthorizedAccess,
			[]string{"refused the key of SERVICEBUS_CONNECTION_STRING (-servicebus-connection-string)", `for queue "orders"`}},
		{"closed port", cs(closedAddr, sbbroker.DefaultKey), "orders", azservicebus.CodeConnectionLost,
			[]string{"cannot reach the broker at " + closedAddr, "the Endpoint of SERVICEBUS_CONNECTION_STRING"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := cli.ServiceBus{ConnectionString: tt.connStr, Queue: tt.queue}
			client, err := sb.NewClient()
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close(context.Background())
			r, err := client.NewReceiverForQueue(tt.queue, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err = r.PeekMessages(ctx, 1, nil)
			err = sb.Explain(err, `queue "`+tt.queue+`"`, cli.QueueSetting)
			var sbErr *azservicebus.Error
			if !errors.As(err, &sbErr) || sbErr.Code != tt.wantCode {
				t.Fatalf("err = %v, want one wrapping the SDK's %s", err, tt.wantCode)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v\nwant %q in it", err, want)
				}
			}
			if strings.Contains(err.Error(), "WRONGKEY") {
				t.Errorf("the key is shown: %v", err)
			}
		})
	}
}

// TestExplainServiceBusInAzure checks the explanations with a namespace
// and Entra ID, on the SDK's error codes.
func TestExplainServiceBusInAzure(t *testing.T) {
	sub := `subscription "loyalty" of topic "order-events"`
	tests := []struct {
		name string
		err  error
		want []string // empty: err unchanged
	}{
		{"missing subscription", &azservicebus.Error{Code: azservicebus.CodeNotFound}, []string{sub + " does not exist in namespace sb-x.servicebus.windows.net (SERVICEBUS_NAMESPACE)", "set " + cli.SubscriptionSettings}},
		{"no role", &azservicebus.Error{Code: azservicebus.CodeUnauthorizedAccess}, []string{"refused this identity access to " + sub, "Azure Service Bus Data Receiver", "AZURE_CLIENT_ID", "SERVICEBUS_NAMESPACE (-namespace)"}},
		{"unreachable", &azservicebus.Error{Code: azservicebus.CodeConnectionLost}, []string{"cannot reach namespace sb-x.servicebus.windows.net", "check SERVICEBUS_NAMESPACE (-namespace) and the network"}},
		{"no answer", context.DeadlineExceeded, []string{"cannot reach namespace sb-x.servicebus.windows.net"}},
		{"lock lost", &azservicebus.Error{Code: azservicebus.CodeLockLost}, nil},
		{"other", errors.New("boom"), nil},
	}
	for _, tt := range tests {
		got := cli.ExplainServiceBus(tt.err, "sb-x", "", sub, cli.SubscriptionSettings)
		if !errors.Is(got, tt.err) {
			t.Errorf("%s: %v does not wrap %v", tt.name, got, tt.err)
		}
		if len(tt.want) == 0 && got != tt.err {
			t.Errorf("%s: %v, want the error unchanged", tt.name, got)
		}
		for _, want := range tt.want {
			if !strings.Contains(got.Error(), want) {
				t.Errorf("%s: %v\nwant %q in it", tt.name, got, want)
			}
		}
	}
	if got := cli.ExplainServiceBus(nil, "sb-x", "", sub, cli.SubscriptionSettings); got != nil {
		t.Errorf("nil explained as %v", got)
	}
}
