package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
)

func TestConfig(t *testing.T) {
	base := map[string]string{"SERVICEBUS_CONNECTION_STRING": "Endpoint=sb://127.0.0.1:5672;SharedAccessKeyName=k;SharedAccessKey=s;UseDevelopmentEmulator=true;"}
	tests := []struct {
		name    string
		env     map[string]string
		args    string
		usage   bool // a *cli.UsageError
		wantErr []string
		check   func(t *testing.T, c config)
	}{
		{name: "no command", env: base, args: "", usage: true},
		{name: "unknown command", env: base, args: "queue list", usage: true},
		{name: "unknown verb", env: base, args: "dlq frobnicate", usage: true},
		{name: "unknown flag", env: base, args: "dlq list -frobnicate", usage: true},
		{name: "flags and ids in any order", env: base, args: "dlq resubmit id-1 -yes id-2 -force -queue other -- -id-3",
			check: func(t *testing.T, c config) {
				if !slices.Equal(c.IDs, []string{"id-1", "id-2", "-id-3"}) || !c.Yes || !c.Force || c.ForceWindow || c.Queue != "other" {
					t.Errorf("config = %+v", c)
				}
			}},
		{name: "defaults are the Bicep queue's", env: base, args: "dlq list", check: func(t *testing.T, c config) {
			if c.DuplicateWindow != 10*time.Minute || c.MessageTTL != 14*24*time.Hour || c.LockDuration != time.Minute || c.ResubmissionHorizon != 7*24*time.Hour || c.Queue != "orders" {
				t.Errorf("config = %+v", c)
			}
		}},
		{name: "azd variables", env: map[string]string{"SERVICEBUS_NAMESPACE": "sb-x.servicebus.windows.net", "SERVICEBUS_DUPLICATE_DETECTION_WINDOW": "PT1H", "SERVICEBUS_MESSAGE_TTL": "P10675199DT2H48M5.4775807S"},
			args: "dlq purge -reason InvalidMessage -older-than 7d", check: func(t *testing.T, c config) {
				if c.DuplicateWindow != time.Hour || c.MessageTTL != 0 || c.Reason != "InvalidMessage" || c.OlderThan != 7*24*time.Hour {
					t.Errorf("config = %+v", c)
				}
			}},
		{name: "resubmit needs a selection", env: base, args: "dlq resubmit -yes", wantErr: []string{"dlq resubmit selects by MESSAGE-ID..., by -reason or -all"}},
		{name: "two selections", env: base, args: "dlq purge id-1 -all", wantErr: []string{"give exactly one of them"}},
		{name: "show takes one id", env: base, args: "dlq show a b", wantErr: []string{"dlq show takes exactly one MESSAGE-ID"}},
		{name: "a subscription's dead-letter queue", env: merge(base, map[string]string{"SERVICEBUS_TOPIC": "order-events", "SERVICEBUS_SUBSCRIPTION": "loyalty"}),
			args: "dlq purge -all -subscription shipping", check: func(t *testing.T, c config) {
				if c.Topic != "order-events" || c.Subscription != "shipping" || !c.All {
					t.Errorf("config = %+v", c)
				}
			}},
		// azd puts the relay's SERVICEBUS_TOPIC into every environment.
		{name: "a topic alone leaves the tool on the queue", env: merge(base, map[string]string{"SERVICEBUS_TOPIC": "order-events"}), args: "dlq list",
			check: func(t *testing.T, c config) {
				if c.Subscription != "" || c.Queue != "orders" {
					t.Errorf("config = %+v", c)
				}
			}},
		{name: "resubmit on a subscription", env: merge(base, map[string]string{"SERVICEBUS_TOPIC": "order-events", "SERVICEBUS_SUBSCRIPTION": "loyalty"}),
			args: "dlq resubmit -all -yes", wantErr: []string{"dlq resubmit does not work on a subscription's dead-letter queue", "dlq purge it"}},
		{name: "every subscription problem at once", env: map[string]string{"SERVICEBUS_SUBSCRIPTION": "loyalty/$DeadLetterQueue"},
			args: "dlq resubmit", wantErr: []string{
				"SERVICEBUS_NAMESPACE (-namespace) or", "SERVICEBUS_SUBSCRIPTION (-subscription) without SERVICEBUS_TOPIC (-topic)",
				`SERVICEBUS_SUBSCRIPTION (-subscription): "loyalty/$DeadLetterQueue": character '/'`,
				"dlq resubmit does not work on a subscription's dead-letter queue", "dlq resubmit selects by MESSAGE-ID",
			}},
		{name: "bad topic name", env: base, args: "dlq list -topic /order-events -subscription " + strings.Repeat("s", 51), wantErr: []string{
			`SERVICEBUS_TOPIC (-topic): "/order-events": character '/'`, "has 51 characters; Service Bus allows 50",
		}},
		{name: "every problem at once, each named", env: map[string]string{"SERVICEBUS_LOCK_DURATION": "a minute", "COSMOS_ENDPOINT": "localhost:8081"},
			args: "dlq list -force -all", wantErr: []string{
				`SERVICEBUS_LOCK_DURATION: "a minute"`, "SERVICEBUS_NAMESPACE (-namespace) or", "COSMOS_ENDPOINT (-cosmos-endpoint)",
				"dlq list takes no selection", "-force-window and -force are for dlq resubmit only",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			c, err := parseConfig(fs, strings.Fields(tt.args), func(k string) string { return tt.env[k] })
			var ue *cli.UsageError
			switch {
			case tt.usage:
				if !errors.As(err, &ue) {
					t.Fatalf("err = %v, want a usage error", err)
				}
			case len(tt.wantErr) > 0:
				if err == nil {
					t.Fatalf("no error, want %q", tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not name %q", err, w)
					}
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				tt.check(t, c)
			}
		})
	}
}

func TestHelpAndVersion(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), []string{"dlq", "-h"}, func(string) string { return "" }, io.Discard, &out); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"dlq list", "dlq resubmit", "-force-window", "SERVICEBUS_TOPIC", "SERVICEBUS_SUBSCRIPTION", "On a subscription, resubmit is refused", "SERVICEBUS_DUPLICATE_DETECTION_WINDOW", "WORKER_RESUBMISSION_HORIZON", "COSMOS_ENDPOINT"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("-h does not mention %s", v)
		}
	}
	out.Reset()
	if err := run(context.Background(), []string{"-version"}, func(string) string { return "" }, &out, io.Discard); err != nil || !strings.HasPrefix(out.String(), "orderctl github.com/idempotent-consumer/sbcosmos") {
		t.Errorf("-version = %v, %q", err, out.String())
	}
}

// TestDefaultsAgreeWithBicep compares orderctl's defaults of the queue's
// settings with what infra/bicep/main.bicep deploys.
func TestDefaultsAgreeWithBicep(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "infra", "bicep", "main.bicep"))
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^param (\w+) (?:string|int) = '?([^'\n]*?)'?\s*$`).FindAllStringSubmatch(string(src), -1) {
		params[m[1]] = m[2]
	}
	for param, want := range map[string]time.Duration{"duplicateDetectionWindow": defaultDuplicateWindow, "lockDuration": defaultLockDuration, "messageTimeToLive": defaultMessageTTL} {
		d, err := cli.ParseISO8601(params[param])
		if err != nil {
			t.Fatalf("main.bicep param %s: %v", param, err)
		}
		if d != want {
			t.Errorf("param %s: Bicep deploys %v, orderctl defaults to %v", param, d, want)
		}
	}
}

// merge returns a copy of a with b's entries added.
func merge(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}
