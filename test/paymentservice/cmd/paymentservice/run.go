package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
	"github.com/idempotent-consumer/sbcosmos/internal/startup"
	"github.com/idempotent-consumer/sbcosmos/internal/telemetry"
	"github.com/idempotent-consumer/sbcosmos/payments"
	"github.com/idempotent-consumer/sbcosmos/test/paymentservice"
)

// config is the service's configuration: environment variables overridden by
// flags.
type config struct {
	Addr          string
	AllowRemote   bool // listen on a non-loopback Addr
	KeyRetention  time.Duration
	ShutdownGrace time.Duration
	Telemetry     telemetry.Config // traces and metrics over OTLP, when OTEL_EXPORTER_OTLP_ENDPOINT is set
	cli.Logging
}

// parseConfig reads the environment through getenv, then the flags in args.
func parseConfig(fs *flag.FlagSet, args []string, getenv func(string) string) (config, error) {
	var c config
	env := cli.NewEnv(fs, getenv)
	env.String(&c.Addr, "addr", "PAYMENTS_ADDR", "127.0.0.1:8090", "address to listen on, loopback only unless -allow-remote; port 0 picks a free port")
	env.Bool(&c.AllowRemote, "allow-remote", "PAYMENTS_ALLOW_REMOTE", false, "allow listening on a non-loopback address, every interface for an empty host (the service has no TLS and no authentication: anyone who reaches it can charge)")
	env.Duration(&c.KeyRetention, "key-retention", "PAYMENTS_KEY_RETENTION", payments.DefaultKeyRetention,
		"how long an idempotency key is remembered after its charge (payments are kept for ever); the order worker must never assume longer, and resolves claims older than it assumes by GET /payments?orderId=")
	env.Duration(&c.ShutdownGrace, "shutdown-grace", "PAYMENTS_SHUTDOWN_GRACE", 10*time.Second, "how long in-flight requests may finish after SIGTERM")
	c.Telemetry.Define(env, "paymentservice", "")
	c.Logging.Define(env)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: paymentservice [flags]

Serves the reference payment service: POST /payments with an Idempotency-Key
header charges once per key for as long as it remembers the key,
GET /payments?orderId=<id> lists an order's payments from the ledger (kept for
ever), GET /payments/{paymentId}, POST /payments/probe answers 204 while a
capture would go through (charging nothing), GET /healthz. State is in memory
only. With
OTEL_EXPORTER_OTLP_ENDPOINT set, every request is a server span continuing
the caller's trace (traceparent), with its Idempotency-Key as an attribute.

`+cli.LocalStackUsage+cli.VersionUsage("paymentservice")+`
Flags:
`)
		fs.PrintDefaults()
	}
	if err := env.Parse(args); err != nil {
		return c, err
	}
	errs := []error{c.Telemetry.Validate()}
	if !c.AllowRemote {
		errs = append(errs, cli.CheckLoopback("PAYMENTS_ADDR (-addr)", c.Addr))
	}
	if c.KeyRetention <= 0 {
		errs = append(errs, fmt.Errorf("PAYMENTS_KEY_RETENTION (-key-retention) %v must be positive", c.KeyRetention))
	}
	if c.ShutdownGrace <= 0 {
		errs = append(errs, fmt.Errorf("PAYMENTS_SHUTDOWN_GRACE (-shutdown-grace) %v must be positive", c.ShutdownGrace))
	}
	return c, errors.Join(errs...)
}

// newFlagSet returns the command's flag set, writing usage and errors to w.
func newFlagSet(w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("paymentservice", flag.ContinueOnError)
	fs.SetOutput(w)
	return fs
}

// run is the whole program; main only supplies the process's context,
// arguments, environment and output streams. It serves until ctx ends, then
// shuts down gracefully.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if asked, err := startup.Version("paymentservice", args, stdout); asked {
		return err
	}
	cfg, err := parseConfig(newFlagSet(stderr), args, getenv)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	tel, err := telemetry.New(ctx, cfg.Telemetry)
	if err != nil {
		return err
	}
	proc, err := startup.Start(ctx, cfg.Logging, stderr, startup.Options{Flush: tel})
	if err != nil {
		return err
	}
	defer proc.Close()
	logger := proc.Logger

	svc := paymentservice.NewService(&paymentservice.ServiceOptions{KeyRetention: cfg.KeyRetention})
	var h http.Handler = svc
	if tel.Enabled() {
		h = tel.HTTPHandler(svc, "payments", payments.HeaderIdempotencyKey)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           logRequests(logger, h),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	logger.Info("paymentservice listening", "addr", ln.Addr().String(), "key_retention", cfg.KeyRetention.String())
	if cli.CheckLoopback("PAYMENTS_ADDR (-addr)", cfg.Addr) != nil {
		logger.Warn("listening beyond this machine (-allow-remote): the service has no TLS and no authentication, so anyone who reaches it can charge", "addr", ln.Addr().String())
	}
	fmt.Fprintf(stdout, "paymentservice listening on http://%s\n", ln.Addr())

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("paymentservice shutting down", "grace", cfg.ShutdownGrace.String())
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownGrace)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	if err != nil {
		err = fmt.Errorf("shutdown: %w", err)
		srv.Close()
	}
	<-served // http.ErrServerClosed
	logger.Info("paymentservice stopped", "charges", svc.Charges())
	return err
}

// logRequests logs every request after it is answered.
func logRequests(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			// A panicking handler (an aborted answer) is logged with status 0.
			logger.LogAttrs(r.Context(), slog.LevelInfo, "request",
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.Int("status", sw.status),
				slog.String("idempotency_key", r.Header.Get(payments.HeaderIdempotencyKey)),
				slog.Bool("replayed", sw.Header().Get(payments.HeaderIdempotentReplayed) == "true"),
				slog.String("duration", time.Since(start).String()))
		}()
		next.ServeHTTP(sw, r)
	})
}

// statusWriter records the status code of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
