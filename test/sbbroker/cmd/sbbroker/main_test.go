package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
)

func noEnv(string) string { return "" }

func TestRunServesTheSDK(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	stdout, w := io.Pipe()
	var stderr strings.Builder
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, []string{"-addr", "127.0.0.1:0", "-queue", "orders,other", "-lock-duration", "30s"}, noEnv, w, &stderr)
		w.Close()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the connection string: %v (stderr: %s)", err, stderr.String())
	}
	connStr := strings.TrimSpace(line)
	if !strings.HasPrefix(connStr, "Endpoint=sb://127.0.0.1:") || !strings.Contains(connStr, "UseDevelopmentEmulator=true") {
		t.Fatalf("connection string %q", connStr)
	}
	go io.Copy(io.Discard, stdout)

	client, err := azservicebus.NewClientFromConnectionString(connStr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(ctx)
	for _, queue := range []string{"orders", "other"} {
		s, err := client.NewSender(queue, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte(queue)}, nil); err != nil {
			t.Fatalf("send to %s: %v", queue, err)
		}
		r, err := client.NewReceiverForQueue(queue, nil)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := r.ReceiveMessages(ctx, 1, nil)
		if err != nil || len(ms) != 1 || string(ms[0].Body) != queue {
			t.Fatalf("receive from %s: %d messages, %v", queue, len(ms), err)
		}
		if got := ms[0].LockedUntil.Sub(*ms[0].EnqueuedTime); got < 29*time.Second || got > 31*time.Second {
			t.Errorf("lock duration %v, want the 30s given by -lock-duration", got)
		}
		// By default a message expires 14 days after it was enqueued, as on
		// the Service Bus infra/bicep deploys (`orderctl dlq show` prints
		// this ExpiresAt).
		if m := ms[0]; m.TimeToLive == nil || *m.TimeToLive != 14*24*time.Hour || m.ExpiresAt == nil || !m.ExpiresAt.Equal(m.EnqueuedTime.Add(14*24*time.Hour)) {
			t.Errorf("TimeToLive %v, ExpiresAt %v, EnqueuedTime %v; want the default 14 days after EnqueuedTime", m.TimeToLive, m.ExpiresAt, m.EnqueuedTime)
		}
		if err := r.CompleteMessage(ctx, ms[0], nil); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if !strings.Contains(stderr.String(), "broker listening") {
		t.Errorf("stderr lacks the start-up log: %s", stderr.String())
	}
}

func TestRunRejectsBadConfiguration(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"non-loopback address", []string{"-addr", "0.0.0.0:0"}, "not a loopback address"},
		{"bad address", []string{"-addr", "nonsense"}, "missing port"},
		{"zero lock duration", []string{"-lock-duration", "0s"}, "must be positive"},
		{"zero max delivery count", []string{"-max-delivery-count", "0"}, "must be positive"},
		{"max delivery count above 2000", []string{"-max-delivery-count", "2001"}, "-max-delivery-count 2001: Service Bus accepts 1 to 2000"},
		{"negative ttl", []string{"-ttl", "-1s"}, "must not be negative"},
		{"unparsable duration", []string{"-lock-duration", "soon"}, "invalid value"},
		{"stray argument", []string{"extra"}, "unexpected arguments"},
		{"duplicate queue", []string{"-queue", "a,A"}, "already exists"},
		{"topic without a name", []string{"-topic", ":loyalty"}, "has no name"},
		{"duplicate subscription", []string{"-topic", "order-events:loyalty,Loyalty"}, "subscription already exists"},
		{"topic named like a queue", []string{"-queue", "orders", "-topic", "Orders:a"}, "queue already exists"},
		{"bad subscription name", []string{"-topic", "order-events:a$b"}, "invalid subscription name"},
		{"lock below 5 s", []string{"-lock-duration", "4s"}, "-lock-duration 4s: Service Bus accepts 5s to 5m"},
		{"lock above 5 min", []string{"-lock-duration", "6m"}, "-lock-duration 6m0s: Service Bus accepts 5s to 5m"},
		{"lock above 5 min even when unrealistic timings are allowed", []string{"-allow-unrealistic-timings", "-lock-duration", "6m"}, "-lock-duration 6m0s"},
		{"window below 20 s", []string{"-duplicate-detection-window", "5s"}, "-duplicate-detection-window 5s: Service Bus accepts 20s to 168h"},
		{"window above 7 days", []string{"-duplicate-detection-window", "169h"}, "-duplicate-detection-window 169h0m0s"},
		{"subscription name ending in a hyphen", []string{"-topic", "order-events:loyalty-"}, "start and end with a letter or digit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			err := run(context.Background(), tt.args, noEnv, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error()+stderr.String(), tt.want) {
				t.Errorf("run(%q) = %v (stderr %q), want an error mentioning %q", tt.args, err, stderr.String(), tt.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
		})
	}
}

func TestCheckLoopback(t *testing.T) {
	tests := []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:5672", true},
		{"[::1]:5672", true},
		{"localhost:5672", true},
		{"127.0.0.2:0", true},
		{"0.0.0.0:5672", false},
		{":5672", false},
		{"10.0.0.1:5672", false},
		{"example.com:5672", false},
	}
	for _, tt := range tests {
		if err := cli.CheckLoopback("-addr", tt.addr); (err == nil) != tt.ok {
			t.Errorf("cli.CheckLoopback(%q) = %v, want ok=%v", tt.addr, err, tt.ok)
		}
	}
}

func TestHelpAndFlagMistakes(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		status     int
		wantStderr string // what run and Exit wrote together
		maxLines   int
	}{
		{"-h prints the usage and exits 0", []string{"-h"}, 0, "-duplicate-detection-window", 0},
		{"an unknown flag is one line and a hint", []string{"-nope"}, 2, "sbbroker: flag provided but not defined: -nope\nRun 'sbbroker -h'", 2},
		{"a bad value is one line and a hint", []string{"-lock-duration", "soon"}, 2, `sbbroker: invalid value "soon" for flag -lock-duration`, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			err := run(context.Background(), tt.args, noEnv, &stdout, &stderr)
			status := cli.Exit("sbbroker", err, &stderr)
			if status != tt.status {
				t.Errorf("exit status %d, want %d (err %v)", status, tt.status, err)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tt.wantStderr)
			}
			if n := strings.Count(stderr.String(), "\n"); tt.maxLines > 0 && n > tt.maxLines {
				t.Errorf("stderr has %d lines, want at most %d:\n%s", n, tt.maxLines, stderr.String())
			}
		})
	}
}

// TestRunReportsDroppedDuplicates: the standalone broker logs every resend
// that duplicate detection drops, and the counts at exit.
func TestRunReportsDroppedDuplicates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	stdout, w := io.Pipe()
	var stderr strings.Builder
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, []string{"-addr", "127.0.0.1:0", "-duplicate-detection-window", "2m"}, noEnv, w, &stderr)
		w.Close()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the connection string: %v", err)
	}
	go io.Copy(io.Discard, stdout)
	client, err := azservicebus.NewClientFromConnectionString(strings.TrimSpace(line), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(ctx)
	s, err := client.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "a", "a"} {
		if err := s.SendMessage(ctx, &azservicebus.Message{MessageID: &id}, nil); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	logs := stderr.String()
	if n := strings.Count(logs, "duplicate dropped by duplicate detection"); n != 2 || !strings.Contains(logs, "message_id=a window=2m0s") {
		t.Errorf("%d drops logged, want 2 naming message_id=a and the window:\n%s", n, logs)
	}
	if !strings.Contains(logs, "enqueued=2") || !strings.Contains(logs, "dropped_duplicates=2") {
		t.Errorf("the summary at exit does not count the drops:\n%s", logs)
	}
}

// TestRunServesTopics: -topic declares a topic with its subscriptions;
// each subscription gets its own copy, the topic's duplicate detection drops
// a resend before fan-out and is logged under the topic, and the summary at
// exit covers the topic and each subscription.
func TestRunServesTopics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	stdout, w := io.Pipe()
	var stderr strings.Builder
	done := make(chan error, 1)
	env := func(k string) string {
		if k == "SBBROKER_TOPICS" {
			return "ignored:x" // -topic replaces it
		}
		return ""
	}
	go func() {
		done <- run(runCtx, []string{"-addr", "127.0.0.1:0", "-topic", "order-events:loyalty,shipping",
			"-lock-duration", "30s", "-duplicate-detection-window", "2m"}, env, w, &stderr)
		w.Close()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the connection string: %v (stderr: %s)", err, stderr.String())
	}
	go io.Copy(io.Discard, stdout)
	client, err := azservicebus.NewClientFromConnectionString(strings.TrimSpace(line), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(ctx)
	s, err := client.NewSender("order-events", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"e-1", "e-1"} {
		if err := s.SendMessage(ctx, &azservicebus.Message{MessageID: &id}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, sub := range []string{"loyalty", "shipping"} {
		r, err := client.NewReceiverForSubscription("order-events", sub, nil)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := r.ReceiveMessages(ctx, 1, nil)
		if err != nil || len(ms) != 1 || ms[0].MessageID != "e-1" {
			t.Fatalf("receive from %s: %d messages, %v", sub, len(ms), err)
		}
		if got := ms[0].LockedUntil.Sub(*ms[0].EnqueuedTime); got < 29*time.Second || got > 31*time.Second {
			t.Errorf("%s lock duration %v, want the 30s given by -lock-duration", sub, got)
		}
		if err := r.CompleteMessage(ctx, ms[0], nil); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	logs := stderr.String()
	for _, want := range []string{
		"topics=order-events:loyalty,shipping",
		"duplicate dropped by duplicate detection: the sender was told it was accepted\" topic=order-events message_id=e-1 window=2m0s",
		"\"topic at exit\" topic=order-events enqueued=1 dropped_duplicates=1",
		"\"subscription at exit\" subscription=order-events/Subscriptions/loyalty active=0 locked=0 dead_letters=0 enqueued=1 completed=1",
		"\"subscription at exit\" subscription=order-events/Subscriptions/shipping active=0 locked=0 dead_letters=0 enqueued=1 completed=1",
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "ignored") {
		t.Errorf("SBBROKER_TOPICS was used although -topic was given:\n%s", logs)
	}
}

func TestTopicsFromEnvironment(t *testing.T) {
	var l topicList
	for _, v := range []string{"order-events:loyalty, shipping", "audit", "x:"} {
		if err := l.Set(v); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.String(); got != "order-events:loyalty,shipping;audit:;x:" {
		t.Errorf("String() = %q", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // run returns once the broker has started
	var stdout, stderr strings.Builder
	env := func(k string) string {
		if k == "SBBROKER_TOPICS" {
			return "order-events:loyalty,shipping; audit:all"
		}
		return ""
	}
	if err := run(ctx, []string{"-addr", "127.0.0.1:0"}, env, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr.String(), "topics=order-events:loyalty,shipping;audit:all ") {
		t.Errorf("SBBROKER_TOPICS not applied:\n%s", stderr.String())
	}
}

// TestRunAllowsUnrealisticTimingsWhenAsked: -allow-unrealistic-timings
// admits a lock and a window below Service Bus's minimums (scripts/local.sh
// runs a 5 s window), which the broker refuses without it.
func TestRunAllowsUnrealisticTimingsWhenAsked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	stdout, w := io.Pipe()
	var stderr strings.Builder
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, []string{"-addr", "127.0.0.1:0", "-allow-unrealistic-timings", "-lock-duration", "2s", "-duplicate-detection-window", "5s", "-topic", "order-events:loyalty"}, noEnv, w, &stderr)
		w.Close()
	}()
	if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
		t.Fatalf("no connection string: %v (stderr: %s)", err, stderr.String())
	}
	go io.Copy(io.Discard, stdout)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if !strings.Contains(stderr.String(), "lock_duration=2s") || !strings.Contains(stderr.String(), "duplicate_detection_window=5s") {
		t.Errorf("the start-up log does not show the timings given:\n%s", stderr.String())
	}
}
