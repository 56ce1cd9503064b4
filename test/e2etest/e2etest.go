// Package e2etest runs the project's real binaries in tests: it builds
// orderworker and orderproducer, starts them as processes with a given
// environment, reads the producer's summary and the worker's final summary,
// and reads stored orders back from Cosmos DB; WriteOrder seeds them. The end-to-end tests against
// the project's Service Bus test broker and the integration tests against the
// official emulators share it.
package e2etest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/idempotent-consumer/sbcosmos/order"
)

// Process is a running binary with its captured output (stdout and stderr
// together). The test's cleanup kills it if it is still running and, if the
// test failed, logs its output.
type Process struct {
	Name string
	Cmd  *exec.Cmd

	out  syncBuffer
	done chan struct{}
	err  error
}

// Start runs dir/binary with args and exactly the environment env.
func Start(tb testing.TB, env []string, dir, name, binary string, args ...string) *Process {
	tb.Helper()
	p := &Process{Name: name, done: make(chan struct{})}
	p.Cmd = exec.Command(filepath.Join(dir, binary), args...)
	p.Cmd.Env = env
	p.Cmd.Stdout, p.Cmd.Stderr = &p.out, &p.out
	if err := p.Cmd.Start(); err != nil {
		tb.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.err = p.Cmd.Wait()
		close(p.done)
	}()
	tb.Cleanup(func() {
		p.Cmd.Process.Kill()
		<-p.done
		if tb.Failed() {
			tb.Logf("output of %s:\n%s", name, p.out.String())
		}
	})
	return p
}

// Wait waits for the process to exit and returns its error (nil for exit
// status 0).
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return fmt.Errorf("%s did not exit: %w", p.Name, ctx.Err())
	}
}

// Output returns what the process has written so far.
func (p *Process) Output() string { return p.out.String() }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Until polls cond every 20ms until it holds, and fails the test if ctx
// ends first.
func Until(tb testing.TB, ctx context.Context, what string, cond func() bool) {
	tb.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			tb.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ProducerSummary holds the figures orderproducer prints when it finishes.
type ProducerSummary struct {
	Sent, Total                                          int
	Orders, Duplicates, Reused, Malformed, StatusChanges int
	Queue, Prefix                                        string
	Seed                                                 uint64
}

// ParseProducerSummary finds the producer's summary line in its output.
func ParseProducerSummary(out string) (ProducerSummary, error) {
	var s ProducerSummary
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "sent ") {
			continue
		}
		var rate, elapsed string
		_, err := fmt.Sscanf(line, "sent %d of %d messages to %s in %s (%s msg/s): %d orders, %d duplicates, %d reused ids, %d malformed, %d status changes; id prefix %s seed %d",
			&s.Sent, &s.Total, &s.Queue, &elapsed, &rate, &s.Orders, &s.Duplicates, &s.Reused, &s.Malformed, &s.StatusChanges, &s.Prefix, &s.Seed)
		if err != nil {
			return s, fmt.Errorf("parsing the producer's summary %q: %w", line, err)
		}
		s.Prefix = strings.TrimSuffix(s.Prefix, ",")
		return s, nil
	}
	return s, errors.New("no summary in the producer's output")
}

// RunProducer runs orderproducer to completion and returns its summary; the
// test fails if it fails or did not send everything it planned.
func RunProducer(tb testing.TB, ctx context.Context, env []string, dir string, args ...string) ProducerSummary {
	tb.Helper()
	p := Start(tb, env, dir, "orderproducer", "orderproducer", append([]string{"-progress", "never"}, args...)...)
	if err := p.Wait(ctx); err != nil {
		tb.Fatalf("orderproducer: %v\n%s", err, p.Output())
	}
	s, err := ParseProducerSummary(p.Output())
	if err != nil {
		tb.Fatalf("%v\n%s", err, p.Output())
	}
	if s.Sent != s.Total {
		tb.Fatalf("producer sent %d of %d", s.Sent, s.Total)
	}
	return s
}

// FinalSummary returns the counters of the worker's "final summary" log
// record (JSON lines), or nil if there is none.
func FinalSummary(logs string) map[string]int64 {
	for _, line := range strings.Split(logs, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "final summary" {
			continue
		}
		out := make(map[string]int64)
		for k, v := range rec {
			if n, ok := v.(float64); ok {
				out[k] = int64(n)
			}
		}
		return out
	}
	return nil
}

// ReadOrder reads the stored order document, or reports false for 404.
func ReadOrder(tb testing.TB, ctx context.Context, c *azcosmos.ContainerClient, id string) (order.OrderDocument, bool) {
	tb.Helper()
	resp, err := c.ReadItem(ctx, azcosmos.NewPartitionKeyString(id), id, nil)
	var respErr *azcore.ResponseError
	if errors.As(err, &respErr) && respErr.StatusCode == http.StatusNotFound {
		return order.OrderDocument{}, false
	}
	if err != nil {
		tb.Fatalf("reading order %s: %v", id, err)
	}
	var doc order.OrderDocument
	if err := json.Unmarshal(resp.Value, &doc); err != nil {
		tb.Fatalf("order %s: %v", id, err)
	}
	return doc, true
}
