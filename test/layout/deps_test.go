package layout_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// modulePath is the main module's path; the rules name packages by their
// path relative to the module root ("cosmosstore", "test/sbbroker").
const modulePath = "github.com/idempotent-consumer/sbcosmos"

// The package groups the rules speak of.
var (
	// core is what a user copies for the pattern: the generic consumer,
	// the PeekLock loop, the Cosmos DB adapter and the outbox publisher.
	core = []string{"idempotent", "worker", "cosmosstore", "relay"}
	// exampleDomain is the order example built on the core, which the core
	// must not know.
	exampleDomain = []string{"order", "payments", "examples"}
	// binaries are the production binaries, deployed as they are built.
	binaries = []string{"cmd/orderworker", "cmd/orderrelay", "cmd/orderproducer", "cmd/orderctl"}
	// commandLayerAllowed are product packages outside cmd/ and internal/
	// that may import the command layer anyway, each with its reason.
	commandLayerAllowed = map[string]string{
		// infra is deploy tooling, not a library: it checks the Bicep
		// templates against what the commands accept (an ISO 8601
		// duration in a template must parse as internal/cli parses
		// it), so it must use the commands' own parser. No binary and
		// no core package imports it; the core rule below would report
		// it if one did, since it links internal/cli.
		"infra": "deploy tooling that checks the templates with the commands' parser",
	}
)

// pkg is one package of an import graph: its direct imports (not those of
// its test files), by the names the graph uses.
type pkg struct {
	Module   bool // in the main module; named relative to its root
	Standard bool // in the standard library
	Imports  []string
}

// graph is an import graph: package name -> package.
type graph map[string]pkg

// violation is one break of a rule: package Pkg links Dep, through Via.
type violation struct {
	Rule, Pkg, Dep string
	Via            []string // the import chain from Pkg to Dep
}

func (v violation) String() string {
	s := fmt.Sprintf("%s: %s links %s", v.Rule, v.Pkg, v.Dep)
	if len(v.Via) > 2 {
		s += " (" + strings.Join(v.Via, " -> ") + ")"
	}
	return s
}

// under reports whether module package p is dir or below it.
func under(p string, dirs ...string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// isProduct reports whether module package p is product: everything that is
// not proof tooling (test/) or an example (examples/).
func isProduct(p string) bool { return !under(p, "test", "examples") }

// rule is one dependency rule: no package it applies to may link a
// package it forbids.
type rule struct {
	name    string
	applies func(p string) bool
	forbids func(name string, d pkg) bool
}

var rules = []rule{
	{
		// Proof tooling (models, the simulation, the test broker,
		// emulator helpers) proves the product and must never ship in it.
		// The test files of product packages may use it: the graph holds
		// no test imports.
		name:    "product links proof tooling or an example",
		applies: isProduct,
		forbids: func(n string, d pkg) bool { return d.Module && !isProduct(n) },
	},
	{
		// The module's internal/ is the command layer (configuration,
		// health endpoints, telemetry and start-up, order generation):
		// only commands and other command-layer helpers may import it. The
		// rule forbids the folder, so a new helper is covered too.
		name: "product outside cmd/ and internal/ links a command-layer helper",
		applies: func(p string) bool {
			_, allowed := commandLayerAllowed[p]
			return isProduct(p) && !under(p, "cmd", "internal") && !allowed
		},
		forbids: func(n string, d pkg) bool { return d.Module && under(n, "internal") },
	},
	{
		// The core compiles on its own: copied into another module it
		// needs nothing of the order example and nothing internal.
		name:    "core links internal/ or the example domain",
		applies: func(p string) bool { return under(p, core...) },
		forbids: func(n string, d pkg) bool {
			return d.Module && under(n, append([]string{"internal"}, exampleDomain...)...)
		},
	},
	{
		// The pattern itself is the standard library and nothing else.
		name:    "idempotent links the module or a package outside the standard library",
		applies: func(p string) bool { return under(p, "idempotent") },
		forbids: func(n string, d pkg) bool { return d.Module || !d.Standard },
	},
	{
		name:    "production binary links proof tooling (a model, the simulation, the test broker)",
		applies: func(p string) bool { return slices.Contains(binaries, p) },
		forbids: func(n string, d pkg) bool { return d.Module && under(n, "test") },
	},
	{
		// The PeekLock loop is taken alone: its options (the circuit
		// breaker, OpenTelemetry) are packages of their own under
		// worker/ that plug into its Gate and Hook, so that a copy or an
		// importer of the loop links none of them.
		name:    "the worker loop links OpenTelemetry or one of its options",
		applies: func(p string) bool { return p == "worker" },
		forbids: func(n string, d pkg) bool {
			return strings.HasPrefix(n, "go.opentelemetry.io/") || d.Module && under(n, "worker") && n != "worker"
		},
	},
	{
		// The audit's invariants read through interfaces that cosmosstore
		// and memstore both implement, so that one proof covers both: the
		// package itself knows no Azure SDK.
		name:    "order/audit links an Azure SDK",
		applies: func(p string) bool { return under(p, "order/audit") },
		forbids: func(n string, d pkg) bool { return strings.HasPrefix(n, "github.com/Azure/") },
	},
}

// check returns every violation of the rules in g, sorted, and a violation
// for every package a rule names that g lacks, so that a rename cannot
// empty a rule silently.
func check(g graph) []violation {
	var out []violation
	for _, p := range append(slices.Clone(core), binaries...) {
		if q, ok := g[p]; !ok || !q.Module {
			out = append(out, violation{Rule: "a package the rules name is missing", Pkg: p})
		}
	}
	for _, p := range sortedKeys(g) {
		if !g[p].Module {
			continue
		}
		via := chains(g, p)
		for _, d := range sortedKeys(via) {
			for _, r := range rules {
				if r.applies(p) && r.forbids(d, g[d]) {
					out = append(out, violation{Rule: r.name, Pkg: p, Dep: d, Via: via[d]})
				}
			}
		}
	}
	return out
}

// chains returns every package p links (its transitive imports), each with
// a shortest import chain from p to it.
func chains(g graph, p string) map[string][]string {
	via := map[string][]string{}
	queue := []string{p}
	path := map[string][]string{p: {p}}
	for len(queue) > 0 {
		q := queue[0]
		queue = queue[1:]
		for _, d := range g[q].Imports {
			if _, seen := path[d]; seen {
				continue
			}
			path[d] = append(slices.Clone(path[q]), d)
			via[d] = path[d]
			queue = append(queue, d)
		}
	}
	return via
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// goList runs the go command's list in the module root and returns its
// standard output.
func goList(t *testing.T, args ...string) []byte {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the dependency rules read the go command's package list: %v", err)
	}
	cmd := exec.CommandContext(t.Context(), goBin, append([]string{"list"}, args...)...)
	cmd.Dir = moduleRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// moduleRoot returns the main module's directory: two levels above this
// package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// realGraph returns the import graph of every package of the module and of
// everything they link, without test files: go list -deps -json ./...
func realGraph(t *testing.T) graph {
	t.Helper()
	out := goList(t, "-deps", "-json=ImportPath,Standard,Imports", "./...")
	g := graph{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Standard   bool
			Imports    []string
		}
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decode go list -json: %v", err)
		}
		name, module := relative(p.ImportPath)
		imports := make([]string, len(p.Imports))
		for i, imp := range p.Imports {
			if imp == "C" {
				// cgo: what links is runtime/cgo, which go list
				// names among the deps, not the imports.
				imp = "runtime/cgo"
			}
			imports[i], _ = relative(imp)
		}
		g[name] = pkg{Module: module, Standard: p.Standard, Imports: imports}
	}
	return g
}

// relative returns a package's name in a graph: relative to the module
// root for the module's packages, and whether it is one.
func relative(importPath string) (string, bool) {
	if rest, ok := strings.CutPrefix(importPath, modulePath+"/"); ok {
		return rest, true
	}
	return importPath, importPath == modulePath
}

// TestDependencyRules: the module's real import graph keeps every rule.
func TestDependencyRules(t *testing.T) {
	g := realGraph(t)
	for _, v := range check(g) {
		t.Error(v)
	}
}

// TestDepsCounts logs what go list -deps counts for the worker loop's
// package and the worker binary: every package linked, and how many of
// them are the module's own.
func TestDepsCounts(t *testing.T) {
	g := realGraph(t)
	for _, p := range []string{"worker", "cmd/orderworker"} {
		lines := strings.Fields(string(goList(t, "-deps", "./"+p)))
		var module []string
		for _, l := range lines {
			if name, ok := relative(l); ok {
				module = append(module, name)
			}
		}
		t.Logf("go list -deps ./%s: %d packages, %d of them in the module: %s", p, len(lines), len(module), strings.Join(module, " "))
		// The graph the rules check links the same packages.
		want := len(chains(g, p)) + 1 // go list -deps lists the package itself
		if len(lines) != want {
			t.Errorf("go list -deps ./%s lists %d packages; the rules' graph links %d", p, len(lines), want)
		}
	}
}

// TestTopLevel: the design card's top level stays.
func TestTopLevel(t *testing.T) {
	root := moduleRoot(t)
	for _, tt := range []struct {
		path string
		dir  bool
	}{
		{"go.mod", false},
		{"go.sum", false},
		{"README.md", false},
		{"cmd/orderworker", true},
		{"cmd/orderproducer", true},
		{"order", true},
		{"cosmosstore", true},
		{"infra/bicep", true},
		{"test/emulator", true},
	} {
		fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(tt.path)))
		switch {
		case err != nil:
			t.Errorf("the design card's %s: %v", tt.path, err)
		case fi.IsDir() != tt.dir:
			t.Errorf("the design card's %s: directory = %v, want %v", tt.path, fi.IsDir(), tt.dir)
		}
	}
}

// synthetic returns an import graph from lines "pkg: import import ...".
// A name whose first element has a dot is a third-party package; a name
// whose first element is a top-level directory of the module is a module
// package; any other is in the standard library.
func synthetic(lines ...string) graph {
	top := []string{"cmd", "cosmosstore", "examples", "idempotent", "infra", "internal", "order", "payments", "relay", "test", "worker"}
	kind := func(n string) pkg {
		first, _, _ := strings.Cut(n, "/")
		return pkg{Module: slices.Contains(top, first), Standard: !strings.Contains(first, ".") && !slices.Contains(top, first)}
	}
	g := graph{}
	add := func(n string) {
		if _, ok := g[n]; !ok {
			g[n] = kind(n)
		}
	}
	for _, l := range lines {
		name, imports, _ := strings.Cut(l, ":")
		name = strings.TrimSpace(name)
		add(name)
		p := g[name]
		for _, imp := range strings.Fields(imports) {
			add(imp)
			p.Imports = append(p.Imports, imp)
		}
		g[name] = p
	}
	return g
}

// layoutAsIntended is the layout the rules describe, as a synthetic graph.
var layoutAsIntended = []string{
	"idempotent: context crypto/sha256 encoding/json errors fmt sync",
	"cosmosstore: idempotent github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos",
	"worker: idempotent github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus",
	"worker/breaker: worker idempotent",
	"worker/otelworker: worker idempotent go.opentelemetry.io/otel/trace",
	"order: idempotent",
	"payments: order net/http",
	"relay: idempotent github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus",
	"order/audit: order idempotent", // it restates the relay's lease format: relay links the Service Bus SDK
	"internal/cli: cosmosstore flag",
	"internal/health: net/http",
	"internal/telemetry: internal/cli worker/otelworker",
	"internal/ordergen: order",
	"infra: internal/cli",
	"cmd/orderworker: worker worker/breaker worker/otelworker cosmosstore order payments internal/cli internal/health internal/telemetry",
	"cmd/orderrelay: relay cosmosstore order internal/cli internal/telemetry",
	"cmd/orderproducer: internal/ordergen internal/cli internal/telemetry",
	"cmd/orderctl: cosmosstore order order/audit payments internal/cli",
	"examples/invoice: idempotent",
	"test/memstore: idempotent",
	"test/sbqueue: sync",
	"test/sbbroker: test/sbqueue",
	"test/paymentservice: payments",
	"test/internal/simulation: worker worker/breaker worker/otelworker order test/memstore test/sbqueue test/paymentservice",
	"test/simulate: test/internal/simulation internal/cli",
	"test/emulator: infra",
}

// TestCheck_ReportsEachViolation feeds the checker synthetic graphs, each
// the intended layout with one import added or one package removed, and
// asserts that the violation is reported; the intended layout itself
// passes.
func TestCheck_ReportsEachViolation(t *testing.T) {
	if vs := check(synthetic(layoutAsIntended...)); len(vs) != 0 {
		t.Fatalf("the intended layout breaks the rules: %v", vs)
	}
	tests := []struct {
		name   string
		change string // an added line "pkg: imports"; "-pkg" removes pkg
		want   violation
	}{
		{"cosmosstore imports the test broker", "cosmosstore: test/sbbroker",
			violation{Rule: rules[0].name, Pkg: "cosmosstore", Dep: "test/sbbroker"}},
		{"a binary links the test broker through the store", "cosmosstore: test/sbbroker",
			violation{Rule: rules[4].name, Pkg: "cmd/orderworker", Dep: "test/sbbroker"}},
		{"payments imports the queue model", "payments: test/sbqueue",
			violation{Rule: rules[0].name, Pkg: "payments", Dep: "test/sbqueue"}},
		{"relay imports memstore", "relay: test/memstore",
			violation{Rule: rules[0].name, Pkg: "relay", Dep: "test/memstore"}},
		{"order imports the example domain", "order: examples/invoice",
			violation{Rule: rules[0].name, Pkg: "order", Dep: "examples/invoice"}},
		{"orderworker links the example", "cmd/orderworker: examples/invoice",
			violation{Rule: rules[0].name, Pkg: "cmd/orderworker", Dep: "examples/invoice"}},
		{"orderworker links the simulation", "cmd/orderworker: test/internal/simulation",
			violation{Rule: rules[4].name, Pkg: "cmd/orderworker", Dep: "test/internal/simulation"}},
		{"orderproducer links the test broker", "cmd/orderproducer: test/sbbroker",
			violation{Rule: rules[4].name, Pkg: "cmd/orderproducer", Dep: "test/sbbroker"}},
		{"orderctl links memstore", "cmd/orderctl: test/memstore",
			violation{Rule: rules[4].name, Pkg: "cmd/orderctl", Dep: "test/memstore"}},
		{"orderrelay links the fake payments service", "cmd/orderrelay: test/paymentservice",
			violation{Rule: rules[4].name, Pkg: "cmd/orderrelay", Dep: "test/paymentservice"}},
		{"order imports the command layer", "order: internal/cli",
			violation{Rule: rules[1].name, Pkg: "order", Dep: "internal/cli"}},
		{"relay imports telemetry set-up", "relay: internal/telemetry",
			violation{Rule: rules[1].name, Pkg: "relay", Dep: "internal/telemetry"}},
		{"payments imports the order generator", "payments: internal/ordergen",
			violation{Rule: rules[1].name, Pkg: "payments", Dep: "internal/ordergen"}},
		{"order imports the start-up helper", "order: internal/startup",
			violation{Rule: rules[1].name, Pkg: "order", Dep: "internal/startup"}},
		{"the infra exception is infra's alone", "relay: infra",
			violation{Rule: rules[1].name, Pkg: "relay", Dep: "internal/cli"}},
		{"the worker imports order", "worker: order",
			violation{Rule: rules[2].name, Pkg: "worker", Dep: "order"}},
		{"cosmosstore imports order", "cosmosstore: order",
			violation{Rule: rules[2].name, Pkg: "cosmosstore", Dep: "order"}},
		{"the worker imports an internal package", "worker: internal/health",
			violation{Rule: rules[2].name, Pkg: "worker", Dep: "internal/health"}},
		{"the relay imports order", "relay: order",
			violation{Rule: rules[2].name, Pkg: "relay", Dep: "order"}},
		{"the relay imports an internal package", "relay: internal/health",
			violation{Rule: rules[2].name, Pkg: "relay", Dep: "internal/health"}},
		{"a core package is missing: the relay", "-relay",
			violation{Rule: "a package the rules name is missing", Pkg: "relay"}},
		{"the worker imports the example", "worker: examples/invoice",
			violation{Rule: rules[2].name, Pkg: "worker", Dep: "examples/invoice"}},
		{"idempotent imports any internal package", "idempotent: internal/strictjson",
			violation{Rule: rules[2].name, Pkg: "idempotent", Dep: "internal/strictjson"}},
		{"idempotent imports the module", "idempotent: internal/strictjson",
			violation{Rule: rules[3].name, Pkg: "idempotent", Dep: "internal/strictjson"}},
		{"idempotent imports a third-party module", "idempotent: github.com/google/uuid",
			violation{Rule: rules[3].name, Pkg: "idempotent", Dep: "github.com/google/uuid"}},
		{"the loop imports OpenTelemetry", "worker: go.opentelemetry.io/otel/trace",
			violation{Rule: rules[5].name, Pkg: "worker", Dep: "go.opentelemetry.io/otel/trace"}},
		{"the loop imports its telemetry option", "worker: worker/otelworker",
			violation{Rule: rules[5].name, Pkg: "worker", Dep: "go.opentelemetry.io/otel/trace"}},
		{"the loop imports its breaker", "worker: worker/breaker",
			violation{Rule: rules[5].name, Pkg: "worker", Dep: "worker/breaker"}},
		{"an option of the worker imports the example", "worker/breaker: order",
			violation{Rule: rules[2].name, Pkg: "worker/breaker", Dep: "order"}},
		{"the audit imports the Cosmos DB SDK", "order/audit: github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos",
			violation{Rule: rules[6].name, Pkg: "order/audit", Dep: "github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"}},
		{"the audit links the Cosmos DB SDK through cosmosstore", "order/audit: cosmosstore",
			violation{Rule: rules[6].name, Pkg: "order/audit", Dep: "github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"}},
		{"a binary is missing", "-cmd/orderctl",
			violation{Rule: "a package the rules name is missing", Pkg: "cmd/orderctl"}},
		{"a core package is missing", "-worker",
			violation{Rule: "a package the rules name is missing", Pkg: "worker"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines := slices.Clone(layoutAsIntended)
			g := synthetic(append(lines, tt.change)...)
			if gone, ok := strings.CutPrefix(tt.change, "-"); ok {
				g = synthetic(lines...)
				delete(g, gone)
			}
			got := check(g)
			found := slices.ContainsFunc(got, func(v violation) bool {
				return v.Rule == tt.want.Rule && v.Pkg == tt.want.Pkg && v.Dep == tt.want.Dep
			})
			if !found {
				t.Errorf("check = %v\nwant it to report %v", got, tt.want)
			}
		})
	}
}

// TestCheck_AllowedImports: what the rules allow stays allowed, each in a
// graph that otherwise passes.
func TestCheck_AllowedImports(t *testing.T) {
	for _, change := range []string{
		"test/simulate: internal/telemetry",               // proof tooling may use the command layer
		"test/sbbroker: internal/cli",                     // and its commands too
		"examples/invoice: test/memstore",                 // an example may use proof tooling
		"internal/ordergen: internal/health",              // a command-layer helper may use another
		"cosmosstore: github.com/google/uuid",             // the adapter may use modules
		"worker/otelworker: go.opentelemetry.io/otel/sdk", // and so may the worker's telemetry
	} {
		g := synthetic(append(slices.Clone(layoutAsIntended), change)...)
		if got := check(g); len(got) != 0 {
			t.Errorf("with %q, check = %v; want no violation", change, got)
		}
	}
}
