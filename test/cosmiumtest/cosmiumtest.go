// Package cosmiumtest runs cosmium, an open-source Azure Cosmos DB NoSQL
// emulator written in Go (github.com/pikami/cosmium, MIT), as a child process
// for tests, so that tests of the Cosmos DB adapter talk to a real HTTP server
// through the real azcosmos SDK without Docker, Azure or the internet.
//
// Cosmium is built from source, once per machine, by the go command from the
// separate tools module in the tools directory beside this file; it never
// enters the main module's dependency graph. The binary is cached in the
// user's cache directory (see [Binary]); set COSMIUM_BIN to use a prebuilt
// binary instead. Tests never skip for want of the binary: if it cannot be
// built, [Start] fails the test and says why.
//
// # Fidelity
//
// Cosmium v0.1.20 is faithful, with azcosmos v1.5.0, for: single-document
// create (201, or 409 when the id exists, atomically: of 32 concurrent creates
// of one id exactly one succeeds), read (200 or 404), delete, patch and
// queries with a WHERE filter. It is NOT faithful for: transactional batches
// (not atomic, and the response reports success even when an operation
// conflicted), ETags (none are returned; If-Match is ignored), TTL (ignored),
// partition isolation (items are keyed by id alone) and request charges (none
// are reported). Tests of those behaviours need the in-memory model (package
// memstore), a fake gateway, or the official emulator, and their names must
// say so.
//
// # Network exposure
//
// Cosmium v0.1.20's own server listens on every interface whatever its -Host
// flag says: api/router.go line 91 listens on fmt.Sprintf(":%d", Port), and
// -Host only sets the host name it advertises (api/config/config.go lines 19
// and 54-56). Its account key does not protect it either: every path under
// /cosmium, such as GET /cosmium/export, which returns every database,
// container and document, is served without authentication
// (api/handlers/middleware/authentication.go lines 16-18). So this package
// does not run cosmium's server: it builds tools/cmd/cosmium, which serves
// cosmium's own router (the same handlers and store) on a listener bound to
// -Host, and starts it with -Host 127.0.0.1: nothing off this machine can
// reach it. It uses the well-known emulator key, and holds test data only.
package cosmiumtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Version is the cosmium release this package builds. It must equal the
// version the tools module requires.
const Version = "v0.1.20"

// Key is the account key of every server this package starts: the well-known
// key of the Cosmos DB emulators, which is public and protects nothing.
const Key = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="

// startTimeout bounds how long NewServer waits for a started process to
// answer before giving up on it. It is not an assertion: a healthy cosmium
// answers within milliseconds.
const startTimeout = 30 * time.Second

// Server is a running cosmium process serving plain HTTP on the loopback
// interface only (see the package documentation). Its methods are safe for
// concurrent use.
type Server struct {
	// Endpoint is the account endpoint, "http://127.0.0.1:PORT/", for
	// azcosmos.NewClientWithKey together with Key.
	Endpoint string
	// Key is the account key the server accepts.
	Key string

	cmd       *exec.Cmd
	out       *syncBuffer
	exited    chan struct{} // closed when the process has exited
	waitErr   error         // the process's exit status; read after exited is closed
	closeOnce sync.Once
	closeErr  error
}

// Start starts a cosmium server for the test, building the binary first if no
// build is cached, and stops it when the test and its subtests finish. It
// fails the test, never skips it, if the server cannot be built or started.
// Every call starts a separate, empty server.
func Start(tb testing.TB) *Server {
	tb.Helper()
	_, built, err := binary(tb.Context())
	if err != nil {
		tb.Fatalf("cosmiumtest: %v", err)
	}
	if built > 0 {
		tb.Logf("cosmiumtest: built cosmium %s in %v", Version, built.Round(100*time.Millisecond))
	}
	s, err := NewServer(tb.Context())
	if err != nil {
		tb.Fatalf("cosmiumtest: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("cosmiumtest: %v", err)
		}
		if tb.Failed() {
			tb.Logf("cosmium output:\n%s", s.Output())
		}
	})
	return s
}

// NewServer starts a cosmium server on a free loopback port and returns once
// it answers HTTP requests. ctx bounds building the binary (see [Binary]) and
// starting the server, not the server's life: the caller must call Close.
func NewServer(ctx context.Context) (*Server, error) {
	bin, err := Binary(ctx)
	if err != nil {
		return nil, err
	}
	// Cosmium cannot listen on port 0, so pick a free port and hand it over.
	// Another process may take the port in between; then cosmium exits at
	// once, and a new port is tried.
	const attempts = 3
	var errs []error
	for range attempts {
		s, err := start(ctx, bin)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil || !errors.Is(err, errExitedEarly) {
			break
		}
	}
	return nil, errors.Join(errs...)
}

var errExitedEarly = errors.New("cosmium exited before it answered")

func start(ctx context.Context, bin string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	host := "127.0.0.1"
	// exec.Command, not CommandContext: the server outlives ctx.
	cmd := exec.Command(bin,
		"-Host", host,
		"-Port", strconv.Itoa(port),
		"-AccountKey", Key,
		"-DisableTls",
		"-LogLevel", "error",
	)
	cmd.Env = childEnv()
	out := &syncBuffer{}
	cmd.Stdout = out
	cmd.Stderr = out
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &Server{
		Endpoint: "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/",
		Key:      Key,
		cmd:      cmd,
		out:      out,
		exited:   make(chan struct{}),
	}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("%w\ncosmium output:\n%s", err, s.Output())
	}
	return s, nil
}

// waitReady polls an unauthenticated cosmium endpoint until it answers 200,
// the process exits, or ctx or startTimeout ends.
func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	probe := s.Endpoint + "cosmium/export"
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, probe, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("%w on %s: %v", errExitedEarly, s.Endpoint, s.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("cosmium on %s did not answer: %w", s.Endpoint, ctx.Err())
		case <-tick.C:
		}
	}
}

// ConnectionString returns the server's connection string,
// "AccountEndpoint=http://127.0.0.1:PORT/;AccountKey=KEY;".
func (s *Server) ConnectionString() string {
	return "AccountEndpoint=" + s.Endpoint + ";AccountKey=" + s.Key + ";"
}

// Output returns what the process has written to stdout and stderr so far.
// With -LogLevel error that is only its errors.
func (s *Server) Output() string { return s.out.String() }

// Close kills the process and waits for it to exit. All data is lost: cosmium
// keeps it in memory. Close is idempotent; it returns an error only if the
// process had already died of something other than Close.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		select {
		case <-s.exited:
			if s.waitErr != nil {
				s.closeErr = fmt.Errorf("cosmium on %s exited by itself: %w", s.Endpoint, s.waitErr)
			} else {
				s.closeErr = fmt.Errorf("cosmium on %s exited by itself", s.Endpoint)
			}
			return
		default:
		}
		if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			s.closeErr = fmt.Errorf("kill cosmium on %s: %w", s.Endpoint, err)
		}
		<-s.exited
	})
	return s.closeErr
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	return port, nil
}

// childEnv is the environment without COSMIUM_* variables: cosmium reads
// COSMIUM_<FLAG> variables after its flags and lets them override the flags.
func childEnv() []string {
	env := os.Environ()
	kept := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(strings.ToUpper(kv), "COSMIUM_") {
			kept = append(kept, kv)
		}
	}
	return kept
}

// syncBuffer is a bytes.Buffer safe for one writer goroutine per stream and
// concurrent readers. It keeps only the first maxOutput bytes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

const maxOutput = 64 << 10

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := maxOutput - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
