// Command feedproxy serves a change feed over cosmium, which has none, so
// that the real orderrelay can run on the local stack (scripts/local.sh): it
// is e2etest.FeedProxy, the proxy the end-to-end tests use, on a fixed
// address. Point COSMOS_ENDPOINT at it; every request other than the change
// feed reads goes to cosmium unchanged, so the worker, the subscribers and
// orderctl can use it too.
//
// The feed it serves is computed from cosmium's documents, not Cosmos DB's
// log, at the cost of its page and of the writes since the previous read,
// not of the container's size; leases written through it are not fenced (cosmium ignores
// If-Match), so run a single relay instance. See e2etest.FeedProxy for what
// it keeps of Cosmos DB and what it does not.
//
// The writes that go through it (on the local stack, every service's) are
// read by id at the next change feed read, so a read costs its page and the
// writes since the previous one; every -rescan (30s by default) a read also
// lists the whole container, to find writes made to cosmium directly.
//
// Usage:
//
//	feedproxy -cosmos-endpoint http://127.0.0.1:8081/ -cosmos-key KEY [-addr 127.0.0.1:8082]
//	          [-cosmos-database orders] [-cosmos-container orders] [-rescan 30s]
//
// Every flag defaults to an environment variable: FEEDPROXY_ADDR,
// FEEDPROXY_COSMOS_ENDPOINT (cosmium's endpoint, not the proxy's),
// COSMOS_KEY, COSMOS_DATABASE, COSMOS_CONTAINER and FEEDPROXY_RESCAN. It prints the proxy's
// endpoint on stdout once it listens. SIGINT or SIGTERM stops it. -h prints
// the usage and exits 0; a mistake on the command line prints one line and
// exits 2.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/test/e2etest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.Exit("feedproxy", err, os.Stderr))
}

// defaultRescan is how often, by default, a change feed read lists the
// whole container: rarely, since on the local stack every writer goes
// through the proxy, whose writes are read by id.
const defaultRescan = 30 * time.Second

// config is the proxy's configuration.
type config struct {
	Addr, CosmosEndpoint, CosmosKey, CosmosDatabase, CosmosContainer string
	Rescan                                                           time.Duration
}

// Validate reports every missing setting at once, naming its variable.
func (c config) Validate() error {
	var errs []error
	if c.CosmosEndpoint == "" {
		errs = append(errs, errors.New("set FEEDPROXY_COSMOS_ENDPOINT (-cosmos-endpoint) to cosmium's endpoint, such as http://127.0.0.1:8081/"))
	}
	if c.CosmosKey == "" {
		errs = append(errs, errors.New("set COSMOS_KEY (-cosmos-key) to cosmium's account key"))
	}
	if c.CosmosDatabase == "" || c.CosmosContainer == "" {
		errs = append(errs, errors.New("set COSMOS_DATABASE (-cosmos-database) and COSMOS_CONTAINER (-cosmos-container)"))
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		errs = append(errs, fmt.Errorf("FEEDPROXY_ADDR (-addr) %q: %w", c.Addr, err))
	}
	if c.Rescan < 0 {
		errs = append(errs, fmt.Errorf("FEEDPROXY_RESCAN (-rescan) %v must not be negative", c.Rescan))
	}
	return errors.Join(errs...)
}

// run parses the configuration, listens, prints the proxy's endpoint and
// serves until ctx is done.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("feedproxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	env := cli.NewEnv(fs, getenv)
	env.String(&c.Addr, "addr", "FEEDPROXY_ADDR", "127.0.0.1:8082", "address to listen on")
	env.String(&c.CosmosEndpoint, "cosmos-endpoint", "FEEDPROXY_COSMOS_ENDPOINT", "", "cosmium's endpoint, the proxy's target")
	env.Secret(&c.CosmosKey, "cosmos-key", "COSMOS_KEY", "", "cosmium's account key")
	env.String(&c.CosmosDatabase, "cosmos-database", "COSMOS_DATABASE", "orders", "database of the container whose change feed is served")
	env.String(&c.CosmosContainer, "cosmos-container", "COSMOS_CONTAINER", "orders", "container whose change feed is served")
	env.Duration(&c.Rescan, "rescan", "FEEDPROXY_RESCAN", defaultRescan, "how often a change feed read lists the whole container, to find writes that did not go through the proxy (0: every read); the writes through it are read by id")
	err := env.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	var usageErr *cli.UsageError
	if errors.As(err, &usageErr) {
		return err
	}
	if err := errors.Join(err, c.Validate()); err != nil {
		return err
	}
	p, err := e2etest.NewFeedProxy(c.CosmosEndpoint, c.CosmosKey, c.CosmosDatabase, c.CosmosContainer)
	if err != nil {
		return err
	}
	p.SetRescan(c.Rescan)
	if u, err := url.Parse(c.CosmosEndpoint); err == nil && u.Host == c.Addr {
		return fmt.Errorf("FEEDPROXY_COSMOS_ENDPOINT (-cosmos-endpoint) %s is the proxy's own address: give cosmium's endpoint", c.CosmosEndpoint)
	}
	l, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return fmt.Errorf("FEEDPROXY_ADDR (-addr): %w", err)
	}
	p.SetAddr(l.Addr().String())
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintln(stdout, p.Endpoint)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	w := p.Work()
	fmt.Fprintf(stderr, "feedproxy stopped: %d change feed reads answered, %d with changes; %d log entries visited, %d documents listed and %d fetched from cosmium\n",
		w.Reads, w.Modified, w.Scanned, w.Listed, w.Fetched)
	return nil
}
