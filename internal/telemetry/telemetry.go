package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/contrib/bridges/otelslog"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
)

// Config is a command's telemetry settings. The zero value exports
// nothing.
type Config struct {
	// ServiceName is the service.name resource attribute
	// (OTEL_SERVICE_NAME).
	ServiceName string
	// OTLPEndpoint is the base URL of an OTLP collector
	// (OTEL_EXPORTER_OTLP_ENDPOINT), such as http://localhost:4318 for
	// OTLP/HTTP, whose /v1/traces and /v1/metrics receive traces and
	// metrics, or http://otel.service.k8se-apps:4317/ for gRPC, where only
	// the host and port count and http:// means without TLS. Empty: no
	// OTLP export. The exporters read the other OTEL_EXPORTER_OTLP_*
	// variables (headers, timeout, compression) from the process
	// environment themselves.
	OTLPEndpoint string
	// OTLPProtocol is the OTLP transport (OTEL_EXPORTER_OTLP_PROTOCOL):
	// ProtocolHTTPProtobuf, the OpenTelemetry specification's default
	// (empty means it too), or ProtocolGRPC, which the Azure Container Apps
	// managed OpenTelemetry agent takes. The Go exporters do not choose a
	// transport from the variable: each speaks its own (otlptracehttp
	// http/protobuf, otlptracegrpc gRPC), so New picks the exporter by it.
	OTLPProtocol string
	// MetricsExporter says whether the metrics go to the OTLP endpoint
	// (OTEL_METRICS_EXPORTER, as the OpenTelemetry specification names it):
	// MetricsExporterOTLP (empty means it too) or MetricsExporterNone, which
	// exports traces only, for a collector that takes no metrics (the Azure
	// Container Apps agent with no metrics destination). It does not affect
	// Prometheus.
	MetricsExporter string
	// LogsExporter is OTEL_LOGS_EXPORTER: LogsOTLP (empty means it too)
	// exports the command's logs as OpenTelemetry log records to
	// OTLPEndpoint, beside the console, when that is set; LogsNone exports
	// none.
	LogsExporter string
	// Prometheus serves the metrics for scraping (Providers.MetricsHandler).
	Prometheus bool
	// TracesSampler is OTEL_TRACES_SAMPLER, the OpenTelemetry
	// specification's sampler names: parentbased_always_on (empty means it
	// too), parentbased_traceidratio, parentbased_always_off, always_on,
	// traceidratio, always_off. TracesSamplerArg (OTEL_TRACES_SAMPLER_ARG)
	// is the ratio of the *traceidratio samplers, 0 to 1 (empty: 1). Over
	// any of them the worker's redeliveries and failed deliveries are kept
	// (KeptSampler).
	TracesSampler, TracesSamplerArg string
	// AzureTracingDisabled is AZURE_TRACING_DISABLED, the Azure SDKs'
	// switch: true leaves the Azure SDK clients (Cosmos DB) without spans
	// of their own; the process span, its outcome and duration stay. The
	// SDK builds and wraps its operation and HTTP spans before the sampler
	// decides, about 45 allocations per Cosmos DB call; a Store given
	// AzureUntraced sends the calls of a dropped trace through a client
	// without spans, so only the sampled traces' calls pay them, whatever
	// this says.
	AzureTracingDisabled bool
}

// The values of Config.TracesSampler, as OTEL_TRACES_SAMPLER spells them.
const (
	SamplerAlwaysOn                = "always_on"
	SamplerAlwaysOff               = "always_off"
	SamplerTraceIDRatio            = "traceidratio"
	SamplerParentBasedAlwaysOn     = "parentbased_always_on"
	SamplerParentBasedAlwaysOff    = "parentbased_always_off"
	SamplerParentBasedTraceIDRatio = "parentbased_traceidratio"
)

// The values of Config.LogsExporter, as OTEL_LOGS_EXPORTER spells them.
const (
	LogsOTLP = "otlp"
	LogsNone = "none"
)

// The values of Config.OTLPProtocol, as OTEL_EXPORTER_OTLP_PROTOCOL spells
// them.
const (
	ProtocolHTTPProtobuf = "http/protobuf"
	ProtocolGRPC         = "grpc"
)

// The values of Config.MetricsExporter, as OTEL_METRICS_EXPORTER spells
// them.
const (
	MetricsExporterOTLP = "otlp"
	MetricsExporterNone = "none"
)

// Define defines the settings on env: OTEL_SERVICE_NAME (-otel-service-name,
// default service), OTEL_EXPORTER_OTLP_ENDPOINT (-otlp-endpoint),
// OTEL_EXPORTER_OTLP_PROTOCOL (-otlp-protocol; empty is http/protobuf) and, when
// prometheusEnv is not empty, a Prometheus switch under that variable
// (-metrics-prometheus), such as WORKER_METRICS_PROMETHEUS.
func (c *Config) Define(env *cli.Env, service, prometheusEnv string) {
	env.String(&c.ServiceName, "otel-service-name", "OTEL_SERVICE_NAME", service, "service.name of the traces and metrics exported")
	env.SecretURL(&c.OTLPEndpoint, "otlp-endpoint", "OTEL_EXPORTER_OTLP_ENDPOINT", "", "base URL of an OTLP collector, such as http://localhost:4318 (http/protobuf) or http://localhost:4317 (grpc); when set, traces, metrics and logs are exported to it")
	env.String(&c.OTLPProtocol, "otlp-protocol", "OTEL_EXPORTER_OTLP_PROTOCOL", "", "OTLP transport: http/protobuf (when empty) or grpc (what the Azure Container Apps OpenTelemetry agent sets)")
	env.String(&c.MetricsExporter, "metrics-exporter", "OTEL_METRICS_EXPORTER", "", "otlp (when empty): export the metrics to the OTLP endpoint too; none: traces only, for a collector that takes no metrics")
	env.String(&c.TracesSampler, "otel-traces-sampler", "OTEL_TRACES_SAMPLER", "", "which traces are exported: parentbased_always_on (when empty: every trace), parentbased_traceidratio (the share OTEL_TRACES_SAMPLER_ARG of new traces, and those whose producer's trace was sampled), always_on, always_off, traceidratio, parentbased_always_off; a redelivery's trace and a failed delivery's span are kept whatever it says")
	env.String(&c.TracesSamplerArg, "otel-traces-sampler-arg", "OTEL_TRACES_SAMPLER_ARG", "", "the ratio of the traceidratio samplers, 0 to 1 (when empty: 1)")
	env.Bool(&c.AzureTracingDisabled, "azure-tracing-disabled", "AZURE_TRACING_DISABLED", false, "true: the Azure SDK clients (Cosmos DB) record no spans of their own; the worker's spans stay")
	env.String(&c.LogsExporter, "otel-logs-exporter", "OTEL_LOGS_EXPORTER", "", "otlp (when empty): with an OTLP endpoint, the logs are also exported as OpenTelemetry log records, with the trace and span ids of the context they were logged with; none: not exported")
	if prometheusEnv != "" {
		env.Bool(&c.Prometheus, "metrics-prometheus", prometheusEnv, false, "serve the metrics in the Prometheus format on the health listener's /metrics")
	}
}

// Validate reports every problem of the settings at once, naming the
// variables.
func (c *Config) Validate() error {
	var errs []error
	if c.OTLPEndpoint != "" {
		if u, err := url.Parse(c.OTLPEndpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT (-otlp-endpoint) %q: want an http:// or https:// URL with a host", cli.MaskURL(c.OTLPEndpoint)))
		}
	}
	switch c.OTLPProtocol {
	case "", ProtocolHTTPProtobuf, ProtocolGRPC:
	default:
		errs = append(errs, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL (-otlp-protocol) %q: want %s or %s", c.OTLPProtocol, ProtocolHTTPProtobuf, ProtocolGRPC))
	}
	switch c.MetricsExporter {
	case "", MetricsExporterOTLP, MetricsExporterNone:
	default:
		errs = append(errs, fmt.Errorf("OTEL_METRICS_EXPORTER (-metrics-exporter) %q: want %s or %s", c.MetricsExporter, MetricsExporterOTLP, MetricsExporterNone))
	}
	switch c.LogsExporter {
	case "", LogsNone:
	case LogsOTLP:
		if c.OTLPEndpoint == "" {
			errs = append(errs, errors.New("OTEL_LOGS_EXPORTER (-otel-logs-exporter) otlp exports to OTEL_EXPORTER_OTLP_ENDPOINT (-otlp-endpoint), which is not set"))
		}
	default:
		errs = append(errs, fmt.Errorf("OTEL_LOGS_EXPORTER (-otel-logs-exporter) %q: want %s or %s", c.LogsExporter, LogsOTLP, LogsNone))
	}
	if _, err := c.sampler(); err != nil {
		errs = append(errs, err)
	}
	if c.Enabled() && c.ServiceName == "" {
		errs = append(errs, errors.New("OTEL_SERVICE_NAME (-otel-service-name) must not be empty when telemetry is exported"))
	}
	return errors.Join(errs...)
}

// sampler returns the sampler of TracesSampler and TracesSamplerArg, under
// KeptSampler, which keeps what the worker marks as kept.
func (c *Config) sampler() (sdktrace.Sampler, error) {
	ratio := 1.0
	switch c.TracesSampler {
	case SamplerTraceIDRatio, SamplerParentBasedTraceIDRatio:
		if c.TracesSamplerArg != "" {
			r, err := strconv.ParseFloat(c.TracesSamplerArg, 64)
			if err != nil || r < 0 || r > 1 {
				return nil, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG (-otel-traces-sampler-arg) %q: want a ratio from 0 to 1", c.TracesSamplerArg)
			}
			ratio = r
		}
	}
	var s sdktrace.Sampler
	switch c.TracesSampler {
	case "", SamplerParentBasedAlwaysOn:
		s = sdktrace.ParentBased(sdktrace.AlwaysSample())
	case SamplerParentBasedAlwaysOff:
		s = sdktrace.ParentBased(sdktrace.NeverSample())
	case SamplerParentBasedTraceIDRatio:
		s = sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))
	case SamplerAlwaysOn:
		s = sdktrace.AlwaysSample()
	case SamplerAlwaysOff:
		s = sdktrace.NeverSample()
	case SamplerTraceIDRatio:
		s = sdktrace.TraceIDRatioBased(ratio)
	default:
		return nil, fmt.Errorf("OTEL_TRACES_SAMPLER (-otel-traces-sampler) %q: want one of %s, %s, %s, %s, %s, %s", c.TracesSampler,
			SamplerParentBasedAlwaysOn, SamplerParentBasedTraceIDRatio, SamplerParentBasedAlwaysOff, SamplerAlwaysOn, SamplerTraceIDRatio, SamplerAlwaysOff)
	}
	return KeptSampler(s), nil
}

// Enabled reports whether the settings export anything.
func (c *Config) Enabled() bool { return c.OTLPEndpoint != "" || c.Prometheus }

// LogsEnabled reports whether the settings export the logs: an OTLP
// endpoint, and OTEL_LOGS_EXPORTER not none.
func (c *Config) LogsEnabled() bool { return c.OTLPEndpoint != "" && c.LogsExporter != LogsNone }

// LogGroup is LogAttrs as one "telemetry" group, for a command's
// start-up configuration line.
func (c *Config) LogGroup() slog.Attr {
	return slog.Attr{Key: "telemetry", Value: slog.GroupValue(c.LogAttrs()...)}
}

// LogAttrs returns the settings for the start-up log line.
func (c *Config) LogAttrs() []slog.Attr {
	return []slog.Attr{
		slog.String("otel_service_name", c.ServiceName),
		slog.String("otlp_endpoint", cli.MaskURL(c.OTLPEndpoint)),
		slog.String("otlp_protocol", c.Protocol()),
		slog.Bool("otlp_metrics", c.OTLPEndpoint != "" && c.MetricsExporter != MetricsExporterNone),
		slog.Bool("otlp_logs", c.LogsEnabled()),
		slog.Bool("metrics_prometheus", c.Prometheus),
		slog.String("traces_sampler", c.samplerDescription()),
		slog.Bool("azure_sdk_spans", !c.AzureTracingDisabled),
	}
}

// samplerDescription is the sampler for the start-up line: its name, with
// the ratio of the ratio samplers.
func (c *Config) samplerDescription() string {
	name := c.TracesSampler
	if name == "" {
		name = SamplerParentBasedAlwaysOn
	}
	if strings.HasSuffix(name, SamplerTraceIDRatio) {
		arg := c.TracesSamplerArg
		if arg == "" {
			arg = "1"
		}
		name += " " + arg
	}
	return name
}

// Protocol returns the OTLP transport: OTLPProtocol, or ProtocolHTTPProtobuf
// when it is empty.
func (c *Config) Protocol() string {
	if c.OTLPProtocol == "" {
		return ProtocolHTTPProtobuf
	}
	return c.OTLPProtocol
}

// Providers are the tracer and meter providers a Config asks for, with the
// propagator the project uses. Without any exporter both providers are
// no-ops. Providers is safe for concurrent use.
type Providers struct {
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	Propagator     propagation.TextMapPropagator

	metrics      http.Handler
	logs         slog.Handler // nil: logs not exported
	noAzureSpans bool         // AZURE_TRACING_DISABLED
	shutdown     []func(context.Context) error
}

// Disabled returns providers that record nothing.
func Disabled() *Providers {
	return &Providers{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider(), Propagator: Propagator()}
}

// New builds the providers c asks for. ctx bounds the set-up only. The
// caller must call Shutdown, which flushes what is buffered.
func New(ctx context.Context, c Config) (*Providers, error) {
	if !c.Enabled() {
		return Disabled(), nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(c.ServiceName)))
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	p := &Providers{Propagator: Propagator(), TracerProvider: tracenoop.NewTracerProvider(), noAzureSpans: c.AzureTracingDisabled}
	var readers []sdkmetric.Option
	if c.OTLPEndpoint != "" {
		te, me, err := otlpExporters(ctx, c)
		if err != nil {
			return nil, err
		}
		sampler, _ := c.sampler() // Validate checked it
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(te), sdktrace.WithResource(res), sdktrace.WithSampler(sampler))
		p.TracerProvider = tp
		p.shutdown = append(p.shutdown, tp.Shutdown)
		if me != nil {
			readers = append(readers, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(me)))
		}
	}
	if c.Prometheus {
		reg := prometheus.NewRegistry()
		pe, err := otelprom.New(otelprom.WithRegisterer(reg),
			otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("telemetry: Prometheus exporter: %w", err), p.Shutdown(ctx))
		}
		readers = append(readers, sdkmetric.WithReader(pe))
		p.metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	if len(readers) > 0 {
		mp := sdkmetric.NewMeterProvider(append(readers, sdkmetric.WithResource(res))...)
		p.MeterProvider = mp
		p.shutdown = append(p.shutdown, mp.Shutdown)
	} else {
		// Nothing reads the metrics (OTEL_METRICS_EXPORTER=none, no
		// Prometheus): record none, rather than aggregate them for no one.
		p.MeterProvider = metricnoop.NewMeterProvider()
	}
	if c.LogsEnabled() {
		le, err := otlpLogExporter(ctx, c)
		if err != nil {
			return nil, errors.Join(err, p.Shutdown(ctx))
		}
		// Shut down last, so that the logs of the other shutdowns are
		// exported too.
		lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewBatchProcessor(le)), sdklog.WithResource(res))
		p.logs = otelslog.NewHandler(logScope, otelslog.WithLoggerProvider(lp))
		p.shutdown = append(p.shutdown, lp.Shutdown)
	}
	return p, nil
}

// logScope is the instrumentation scope of the bridged logs.
const logScope = "github.com/idempotent-consumer/sbcosmos/internal/telemetry"

// otlpLogExporter returns the log exporter of c's endpoint and protocol,
// which connects when it first exports.
func otlpLogExporter(ctx context.Context, c Config) (sdklog.Exporter, error) {
	var le sdklog.Exporter
	var err error
	if c.Protocol() == ProtocolGRPC {
		le, err = otlploggrpc.New(ctx, otlploggrpc.WithEndpointURL(c.OTLPEndpoint))
	} else {
		base, _ := url.Parse(c.OTLPEndpoint) // Validate parsed it
		le, err = otlploghttp.New(ctx, otlploghttp.WithEndpointURL(base.JoinPath("v1", "logs").String()))
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP (%s) log exporter: %w", c.Protocol(), err)
	}
	return le, nil
}

// LogHandler returns the slog handler that exports each record as an
// OpenTelemetry log record (the contrib otelslog bridge), or nil when the
// Config exports no logs. A record logged with a context that carries a
// span (slog's *Context methods, or LogAttrs) carries that span's trace
// and span ids. Hand it to startup.Options.LogHandler, which fans the logs
// out to it and to the console at the console's level. A nil p exports none.
func (p *Providers) LogHandler() slog.Handler {
	if p == nil || p.logs == nil {
		return nil
	}
	return p.logs
}

// otlpExporters returns the trace and metric exporters of c's endpoint and
// protocol; the metric exporter is nil when c exports no metrics over OTLP.
// Neither connects yet: the gRPC client dials when it first exports.
func otlpExporters(ctx context.Context, c Config) (sdktrace.SpanExporter, sdkmetric.Exporter, error) {
	var te sdktrace.SpanExporter
	var me sdkmetric.Exporter
	var terr, merr error
	if c.Protocol() == ProtocolGRPC {
		// gRPC takes the host and port; http:// means without TLS.
		te, terr = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(c.OTLPEndpoint))
		if terr == nil && c.MetricsExporter != MetricsExporterNone {
			me, merr = otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithEndpointURL(c.OTLPEndpoint))
		}
	} else {
		base, _ := url.Parse(c.OTLPEndpoint) // Validate parsed it
		te, terr = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(base.JoinPath("v1", "traces").String()))
		if terr == nil && c.MetricsExporter != MetricsExporterNone {
			me, merr = otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(base.JoinPath("v1", "metrics").String()))
		}
	}
	switch {
	case terr != nil:
		return nil, nil, fmt.Errorf("telemetry: OTLP (%s) trace exporter: %w", c.Protocol(), terr)
	case merr != nil:
		return nil, nil, errors.Join(fmt.Errorf("telemetry: OTLP (%s) metric exporter: %w", c.Protocol(), merr), te.Shutdown(ctx))
	}
	return te, me, nil
}

// MetricsHandler returns the Prometheus scrape handler, or nil when the
// Config did not ask for Prometheus. Mount it on /metrics.
func (p *Providers) MetricsHandler() http.Handler { return p.metrics }

// Enabled reports whether p records anything: whether either provider is
// not a no-op one. Providers may be built by hand (tests do, with in-memory
// exporters); the zero Providers is not usable.
func (p *Providers) Enabled() bool {
	_, noTraces := p.TracerProvider.(tracenoop.TracerProvider)
	_, noMetrics := p.MeterProvider.(metricnoop.MeterProvider)
	return !noTraces || !noMetrics
}

// Shutdown flushes and stops the providers, bounded by ctx. It is safe to
// call more than once, from one goroutine.
func (p *Providers) Shutdown(ctx context.Context) error {
	var errs []error
	for _, f := range p.shutdown {
		if err := f(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	p.shutdown = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("telemetry: shutdown: %w", err)
	}
	return nil
}

// ShutdownTimeout bounds the flush at exit that commands give Shutdown.
const ShutdownTimeout = 5 * time.Second
