package layout_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// consumerTest is the test of a user's own module that imports the
// pattern and the test kit: a message type of its own (a note), its Kind,
// and the four outcomes of idempotent.NewConsumer over memstore. Edit it
// here when the Consumer's API changes.
const consumerTest = `package consumer_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
)

type note struct {
	NoteID string ` + "`json:\"noteId\"`" + `
	Text   string ` + "`json:\"text\"`" + `
}

type noteKind struct{}

func (noteKind) Decode(body []byte) (note, error) {
	var n note
	if err := json.Unmarshal(body, &n); err != nil {
		return note{}, err
	}
	if n.NoteID == "" {
		return note{}, errors.New("note: noteId is required")
	}
	return n, nil
}

func (noteKind) ID(n note) string { return n.NoteID }

func (noteKind) RequestHash(n note) string {
	sum := sha256.Sum256([]byte(n.NoteID + "\x00" + n.Text))
	return hex.EncodeToString(sum[:])
}

func (noteKind) Documents(m idempotent.Message, n note, hash string) ([]idempotent.Document, error) {
	body, err := json.Marshal(map[string]string{"id": n.NoteID, "noteId": n.NoteID, "text": n.Text, "requestHash": hash})
	return []idempotent.Document{{ID: n.NoteID, Body: body}}, err
}

func TestFourOutcomes(t *testing.T) {
	c := idempotent.NewConsumer[note](noteKind{}, memstore.New("/noteId"))
	for _, tt := range []struct {
		body  string
		count uint32
		want  idempotent.Outcome
	}{
		{` + "`" + `{"noteId":"n-1","text":"hello"}` + "`" + `, 1, idempotent.Created},
		{` + "`" + `{"noteId":"n-1","text":"hello"}` + "`" + `, 2, idempotent.Duplicate},
		{` + "`" + `{"noteId":"n-1","text":"hello"}` + "`" + `, 1, idempotent.Duplicate},
		{` + "`" + `{"noteId":"n-1","text":"other"}` + "`" + `, 1, idempotent.Mismatch},
		{` + "`" + `{"noteId":` + "`" + `, 1, idempotent.Invalid},
	} {
		r := c.Process(context.Background(), idempotent.Message{ID: "n-1", Body: []byte(tt.body), DeliveryCount: tt.count})
		if r.Outcome != tt.want {
			t.Errorf("%s (delivery %d): %v (%s), want %v", tt.body, tt.count, r.Outcome, r.Description, tt.want)
		}
	}
}
`

// consumerWorkerTest is a second test of that module: the same note
// consumer run by package worker on a queue of the test broker, through
// the unmodified azservicebus client, as a user tests a handler end to
// end without Azure. It uses noteKind from consumerTest.
const consumerWorkerTest = `package consumer_test

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/idempotent-consumer/sbcosmos/idempotent"
	"github.com/idempotent-consumer/sbcosmos/test/memstore"
	"github.com/idempotent-consumer/sbcosmos/test/sbbroker"
	"github.com/idempotent-consumer/sbcosmos/test/sbqueue"
	"github.com/idempotent-consumer/sbcosmos/worker"
)

func TestWorkerOnTheTestBroker(t *testing.T) {
	ns := sbqueue.NewNamespace(sbqueue.RealClock())
	q, err := ns.CreateQueue("notes", sbqueue.QueueOptions{LockDuration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	b := sbbroker.New(ns, sbbroker.Options{})
	if err := b.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := azservicebus.NewClientFromConnectionString(b.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	sender, err := client.NewSender("notes", nil)
	if err != nil {
		t.Fatal(err)
	}
	sent := []struct{ id, body string }{
		{"n-1", ` + "`" + `{"noteId":"n-1","text":"hello"}` + "`" + `},
		{"n-1", ` + "`" + `{"noteId":"n-1","text":"hello"}` + "`" + `},
		{"n-1", ` + "`" + `{"noteId":"n-1","text":"other"}` + "`" + `},
		{"n-2", ` + "`" + `{"noteId":` + "`" + `},
	}
	for _, m := range sent {
		id := m.id
		if err := sender.SendMessage(ctx, &azservicebus.Message{MessageID: &id, Body: []byte(m.body)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	receiver, err := client.NewReceiverForQueue("notes", nil)
	if err != nil {
		t.Fatal(err)
	}
	settled := 0
	w, err := worker.New(receiver, idempotent.NewConsumer(noteKind{}, memstore.New("/noteId")), nil, worker.Options{
		Concurrency: 1, RetryBackoff: -1, SummaryInterval: -1,
		Observe: func(worker.Report) {
			if settled++; settled == len(sent) {
				cancel()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	st := w.Stats().Outcomes
	if st[idempotent.Created] != 1 || st[idempotent.Duplicate] != 1 || st[idempotent.Mismatch] != 1 || st[idempotent.Invalid] != 1 {
		t.Errorf("outcomes %v, want one of each: created, duplicate, mismatch, invalid", st)
	}
	if snap := q.Snapshot(); snap.Completed != 2 || len(snap.DeadLetters) != 2 {
		t.Errorf("queue: %d completed, %d dead-lettered; want 2 and 2", snap.Completed, len(snap.DeadLetters))
	}
}
`

// importerFigures is what importing some of this module costs a user's
// module: the requirements its go.mod gains, the module versions its
// module graph names (go mod graph: the go.mod files the go command reads,
// and go.sum holds, though it builds none of their code), and the modules
// and the packages outside the standard library its build links
// (go list -deps).
type importerFigures struct {
	requires, graph, modules, packages int
	modulePaths                        []string // the modules linked, this one included
}

// importer writes a consumer module outside this module, in a temporary
// directory: module example.com/consumer, requiring this module with a
// replace to this checkout, with a file that imports pkgs (paths relative
// to this module) and the given test files. It runs the go command
// offline (GOPROXY=off: the module cache holds what this module's own
// build fetched) with -mod=mod, so the go command adds the requirements
// the imports need, as go get would. It returns the module's directory
// and a function that runs the go command there under a deadline.
func importer(t *testing.T, pkgs []string, testFiles map[string]string) (string, func(args ...string) string) {
	t.Helper()
	root := moduleRoot(t)
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/consumer\n\ngo 1.26.0\n\nrequire "+modulePath+" v0.0.0\n\nreplace "+modulePath+" => "+filepath.ToSlash(root)+"\n")
	// The checksums of the modules it may need: this module's own.
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write("go.sum", string(sum))
	var src strings.Builder
	src.WriteString("// Package consumer imports what a user of the pattern imports.\npackage consumer\n\nimport (\n")
	for _, p := range pkgs {
		src.WriteString("\t_ \"" + modulePath + "/" + p + "\"\n")
	}
	src.WriteString(")\n")
	write("consumer.go", src.String())
	for name, content := range testFiles {
		write(name, content)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	return dir, func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, goBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GONOSUMDB=*", "GOSUMDB=off")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s in the consumer module: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
		}
		return string(out)
	}
}

// measureImporter builds a consumer module that imports pkgs and returns
// its figures.
func measureImporter(t *testing.T, pkgs []string) importerFigures {
	t.Helper()
	dir, run := importer(t, pkgs, nil)
	run("build", "./...")
	return importerFiguresOf(t, dir, run)
}

func importerFiguresOf(t *testing.T, dir string, run func(...string) string) importerFigures {
	t.Helper()
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var f importerFigures
	inBlock := false
	for _, line := range strings.Split(string(gomod), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "require (":
			inBlock = true
		case line == ")":
			inBlock = false
		case inBlock && line != "", strings.HasPrefix(line, "require "):
			f.requires++
		}
	}
	graph := map[string]bool{}
	for _, line := range strings.Split(run("mod", "graph"), "\n") {
		for _, m := range strings.Fields(line) {
			if !strings.HasPrefix(m, "example.com/consumer") && !strings.HasPrefix(m, "go@") && !strings.HasPrefix(m, "toolchain@") {
				graph[m] = true
			}
		}
	}
	f.graph = len(graph)
	mods := map[string]bool{}
	for _, line := range strings.Split(run("list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}{{end}}", "./..."), "\n") {
		p, mod, ok := strings.Cut(line, " ")
		if !ok || mod == "example.com/consumer" {
			continue
		}
		_ = p
		f.packages++
		mods[mod] = true
	}
	f.modulePaths = sortedKeys(mods)
	f.modules = len(mods)
	return f
}

// TestImportFromAnotherModule: a user's module outside this one imports
// the pattern and the test kit through go.mod (a replace to this
// checkout), and its own tests pass the four outcomes through
// idempotent.NewConsumer over memstore, alone and run by package worker on
// the test broker.
func TestImportFromAnotherModule(t *testing.T) {
	_, run := importer(t, []string{"idempotent"}, map[string]string{"consumer_test.go": consumerTest, "worker_test.go": consumerWorkerTest})
	out := run("test", "-count=1", "-v", "./...")
	for _, test := range []string{"TestFourOutcomes", "TestWorkerOnTheTestBroker"} {
		if !strings.Contains(out, "--- PASS: "+test) {
			t.Errorf("the consumer module's test %s did not pass:\n%s", test, out)
		}
	}
}

// importRows are the imports README's "What an importer pulls in" table
// measures, by its first column.
var importRows = []struct {
	row  string
	pkgs []string
}{
	{"the pattern alone, with the test kit in tests", []string{"idempotent", "test/memstore"}},
	{"the pattern, the loop and the Cosmos DB adapter", []string{"idempotent", "worker", "cosmosstore"}},
}

// TestReadmeImporterFigures: README's figures of what an importer pulls in
// are those of a consumer module built now.
func TestReadmeImporterFigures(t *testing.T) {
	table := readmeTable(t, "an importer that imports")
	for _, r := range importRows {
		t.Run(r.row, func(t *testing.T) {
			f := measureImporter(t, r.pkgs)
			t.Logf("importing %v: go.mod requires %d modules; its graph names %d module versions; the build links %d packages outside the standard library from %d modules: %v",
				r.pkgs, f.requires, f.graph, f.packages, f.modules, f.modulePaths)
			cells, ok := table[r.row]
			if !ok {
				t.Fatalf("README's importer table has no row %q", r.row)
			}
			for i, c := range []struct {
				name string
				want int
			}{
				{"modules its go.mod requires", f.requires},
				{"module versions in its graph", f.graph},
				{"modules its build links", f.modules},
				{"packages outside the standard library", f.packages},
			} {
				if got := leadingNumber(cells, 1+i); got != c.want {
					t.Errorf("README's importer row %q: %s %q, measured %d", r.row, c.name, cellOr(cells, 1+i), c.want)
				}
			}
			if !slices.Contains(f.modulePaths, modulePath) {
				t.Errorf("the consumer links nothing of %s", modulePath)
			}
		})
	}
}
