package deployenv_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/infra"
	"github.com/idempotent-consumer/sbcosmos/test/bench/internal/deployenv"
)

// template is the worker's template, from this package's directory.
var template = filepath.Join("..", "..", "..", "..", "infra", "bicep", "modules", "containerapps.bicep")

func names(vars []deployenv.Var) []string {
	var out []string
	for _, v := range vars {
		out = append(out, v.Name)
	}
	return out
}

// TestWorkerTemplate pins what the benchmark takes from the deployed
// worker's env: when the template's runtime or telemetry settings change,
// this test names the change, and the benchmark's worker-deployed variant
// has already followed it.
func TestWorkerTemplate(t *testing.T) {
	vars, err := deployenv.Read(template, "worker", "worker")
	if err != nil {
		t.Fatal(err)
	}
	env, err := deployenv.Runtime(vars)
	if err != nil {
		t.Fatal(err)
	}
	// GOGC, GOMEMLIMIT and OTEL_LOGS_EXPORTER join these when the template
	// sets them (TestWorkerTemplateWithRuntimeSettings).
	want := []string{
		"LOG_FORMAT=json",
		"OTEL_SERVICE_NAME=orderworker",
		"OTEL_METRICS_EXPORTER=none",
		"OTEL_TRACES_SAMPLER=traceidratio",
		"OTEL_TRACES_SAMPLER_ARG=0.01",
	}
	if !runtimeMatches(env, want) {
		t.Errorf("the worker's runtime environment = %q\nwant %q (plus GOGC, GOMEMLIMIT, OTEL_LOGS_EXPORTER, when set)", env, want)
	}
	// What the benchmark gives its own: the resources, the queue's
	// settings, the health port, the shutdown grace.
	var left []string
	for _, v := range vars {
		if !deployenv.IsRuntime(v.Name) {
			left = append(left, v.Name)
		}
	}
	wantLeft := []string{"AZURE_CLIENT_ID", "SERVICEBUS_NAMESPACE", "SERVICEBUS_QUEUE", "COSMOS_ENDPOINT", "COSMOS_DATABASE", "COSMOS_CONTAINER",
		"SERVICEBUS_LOCK_DURATION", "SERVICEBUS_MAX_DELIVERY_COUNT", "SERVICEBUS_DUPLICATE_DETECTION_WINDOW", "SERVICEBUS_MESSAGE_TTL",
		"WORKER_HEALTH_ADDR", "WORKER_SHUTDOWN_GRACE"}
	if !slices.Equal(left, wantLeft) {
		t.Errorf("variables left to the benchmark = %q\nwant %q", left, wantLeft)
	}
}

// runtimeMatches reports whether env is want plus, at most, the runtime
// settings another change adds to the template (GOGC, GOMEMLIMIT,
// OTEL_LOGS_EXPORTER=none), in any order.
func runtimeMatches(env, want []string) bool {
	var rest []string
	for _, e := range env {
		name, value, _ := strings.Cut(e, "=")
		switch {
		case name == "GOGC" || name == "GOMEMLIMIT" || e == "OTEL_LOGS_EXPORTER=none":
			if value == "" {
				return false
			}
		default:
			rest = append(rest, e)
		}
	}
	slices.Sort(rest)
	want = slices.Clone(want)
	slices.Sort(want)
	return slices.Equal(rest, want)
}

// withRuntimeSettings returns the template with GOGC, GOMEMLIMIT and
// OTEL_LOGS_EXPORTER added to the worker's env, written in three forms (a
// one-line object, a var, a literal): what the deployment decided to set.
func withRuntimeSettings(t *testing.T, src string) string {
	t.Helper()
	const anchor = "              name: 'OTEL_METRICS_EXPORTER'\n              value: otlpMetricsExporter\n            }\n"
	if strings.Count(src, anchor) < 1 {
		t.Fatalf("%s: no OTEL_METRICS_EXPORTER entry to add after", template)
	}
	i := strings.Index(src, "resource worker ")
	j := i + strings.Index(src[i:], anchor) + len(anchor)
	add := "            { name: 'GOGC', value: '200' }\n" +
		"            {\n              name: 'GOMEMLIMIT'\n              value: workerMemoryLimit\n            }\n" +
		"            {\n              name: 'OTEL_LOGS_EXPORTER'\n              value: 'none'\n            }\n"
	src = src[:j] + add + src[j:]
	return strings.Replace(src, "var otlpMetricsExporter = 'none'\n", "var otlpMetricsExporter = 'none'\nvar workerMemoryMiB = 921\nvar workerMemoryLimit = '${workerMemoryMiB}MiB'\n", 1)
}

// TestWorkerTemplateWithRuntimeSettings reads a copy of the template with
// the runtime settings the deployment decided on added (GOGC, GOMEMLIMIT,
// OTEL_LOGS_EXPORTER=none), so that the benchmark takes them the moment
// the template has them.
func TestWorkerTemplateWithRuntimeSettings(t *testing.T) {
	data, err := os.ReadFile(template)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "name: 'GOMEMLIMIT'") {
		t.Log("the template sets GOMEMLIMIT itself; the copy adds it to another container's env")
	}
	vars, err := deployenv.Parse(infra.File{Path: "copy.bicep", Text: withRuntimeSettings(t, string(data))}, "worker", "worker")
	if err != nil {
		t.Fatal(err)
	}
	env, err := deployenv.Runtime(vars)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GOGC=400", "GOMEMLIMIT=921MiB", "OTEL_LOGS_EXPORTER=none", "OTEL_TRACES_SAMPLER=traceidratio"} {
		if !slices.Contains(env, want) {
			t.Errorf("runtime environment %q lacks %s", env, want)
		}
	}
}

// TestRuntimeRefusesWhatItCannotResolve: a runtime variable whose value
// the reader cannot evaluate stops the benchmark; another is left alone.
func TestRuntimeRefusesWhatItCannotResolve(t *testing.T) {
	src := `param memory string
param count int
var grace = 'PT30S'
resource worker 'Microsoft.App/containerApps@2025-01-01' = {
  name: 'w'
  properties: {
    template: {
      containers: [
        {
          name: 'worker'
          env: [
            { name: 'GOMEMLIMIT', value: memory }
            { name: 'SERVICEBUS_MAX_DELIVERY_COUNT', value: string(count) }
            { name: 'WORKER_SHUTDOWN_GRACE', value: grace }
            { name: 'OTEL_SERVICE_NAME', value: 'svc-${grace}' }
          ]
        }
      ]
    }
  }
}
`
	vars, err := deployenv.Parse(infra.File{Path: "t.bicep", Text: src}, "worker", "worker")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(vars), []string{"GOMEMLIMIT", "SERVICEBUS_MAX_DELIVERY_COUNT", "WORKER_SHUTDOWN_GRACE", "OTEL_SERVICE_NAME"}; !slices.Equal(got, want) {
		t.Fatalf("names = %q, want %q", got, want)
	}
	if v := vars[2]; !v.Resolved || v.Value != "PT30S" {
		t.Errorf("WORKER_SHUTDOWN_GRACE = %+v, want PT30S through the var", v)
	}
	if v := vars[3]; !v.Resolved || v.Value != "svc-PT30S" {
		t.Errorf("OTEL_SERVICE_NAME = %+v, want svc-PT30S (interpolated)", v)
	}
	env, err := deployenv.Runtime(vars)
	if err == nil || !strings.Contains(err.Error(), "GOMEMLIMIT") {
		t.Errorf("Runtime = %q, %v; want an error naming GOMEMLIMIT (a param without a default)", env, err)
	}
	if _, err := deployenv.Parse(infra.File{Path: "t.bicep", Text: src}, "worker", "sidecar"); err == nil {
		t.Error("Parse of a missing container: no error")
	}
}
