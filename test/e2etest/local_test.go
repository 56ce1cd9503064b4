package e2etest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/test/cosmiumtest"
	"github.com/idempotent-consumer/sbcosmos/test/e2etest"
)

// TestLocalScript runs scripts/local.sh as the README tells a new user to:
// up, demo, down, on free ports and in a temporary state directory. The demo
// must show every outcome path (resends dropped by the broker's duplicate
// detection, and duplicates, reused ids and malformed messages that reach
// the worker), every created order's event must reach each subscriber
// through the change-feed proxy, the relay and the topic (outbox → topic →
// inbox with the real binaries), and down must stop every process up
// started.
func TestLocalScript(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole local stack (about 30 s)")
	}
	if runtime.GOOS == "windows" {
		t.Skip("scripts/local.sh is a bash script")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl (the script checks the payments service with it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cosmium, err := cosmiumtest.Binary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The binaries up builds, linked from e2etest.BuildCommands (built
	// once for every test that runs them): up still runs its go build,
	// which finds them up to date and links none of them again.
	prebuilt := e2etest.BuildCommands(t)
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range e2etest.Commands {
		name := filepath.Base(c)
		if err := os.Link(filepath.Join(prebuilt, name), filepath.Join(dir, "bin", name)); err != nil {
			t.Logf("up builds %s itself: %v", name, err)
		}
	}
	env := append(os.Environ(),
		"LOCAL_DIR="+dir, "COSMIUM_BIN="+cosmium, "LOCAL_ORDERS=100", "LOCAL_SEED=3",
		"LOCAL_BROKER_PORT="+freePort(t), "LOCAL_COSMOS_PORT="+freePort(t), "LOCAL_FEED_PORT="+freePort(t), "LOCAL_PAYMENTS_PORT="+freePort(t))
	script := filepath.Join("..", "..", "scripts", "local.sh")
	shCtx := func(ctx context.Context, arg string) (string, error) {
		cmd := exec.CommandContext(ctx, "bash", script, arg)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	sh := func(arg string) (string, error) { return shCtx(ctx, arg) }
	t.Cleanup(func() {
		// Stop whatever is left after a failure; ctx is over by now.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		shCtx(ctx, "down")
	})

	if out, err := sh("up"); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	pids := map[string]int{}
	subscribers := []string{"subscriber-loyalty", "subscriber-shipping"}
	for _, s := range append([]string{"cosmium", "feedproxy", "sbbroker", "paymentservice", "orderworker", "orderrelay"}, subscribers...) {
		b, err := os.ReadFile(filepath.Join(dir, "run", s+".pid"))
		if err != nil {
			t.Fatalf("up kept no pid for %s: %v", s, err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if syscall.Kill(pid, 0) != nil {
			t.Fatalf("%s (pid %d) is not running after up", s, pid)
		}
		pids[s] = pid
	}

	out, err := sh("demo")
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`broker: (\d+) resends dropped by duplicate detection`).FindStringSubmatch(out)
	if m == nil || m[1] == "0" {
		t.Errorf("the demo shows no resend dropped by the broker:\n%s", out)
	}
	// The worker's summary is a line of its own; each subscriber's follows
	// its name, as in "subscriber-loyalty: {…}".
	summaries := map[string]map[string]any{}
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, `"msg":"summary"`) {
			continue
		}
		name, body := "orderworker", line
		if n, b, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, "{") {
			name, body = n, b
		}
		var sum map[string]any
		if err := json.Unmarshal([]byte(body), &sum); err != nil {
			t.Fatalf("summary %q: %v", line, err)
		}
		summaries[name] = sum
	}
	summary := summaries["orderworker"]
	for _, k := range []string{"created", "duplicate", "mismatch", "invalid"} {
		if n, _ := summary[k].(float64); n == 0 {
			t.Errorf("the demo's worker summary has %s=0: that path is not shown\n%s", k, out)
		}
	}

	// The demo's claim about run 2 is exact: the drops of its messages it
	// reports are those in the broker's log, and the resends it says
	// reached the worker are among the worker's duplicates and mismatches.
	prefix := regexp.MustCompile(`id prefix (demo-\d+-b),`).FindStringSubmatch(out)
	resends := regexp.MustCompile(`: \d+ orders, (\d+) duplicates, (\d+) reused ids`).FindAllStringSubmatch(out, -1)
	if prefix == nil || len(resends) != 2 {
		t.Fatalf("the demo does not print run 2's id prefix and both runs' resends:\n%s", out)
	}
	brokerLog, err := os.ReadFile(filepath.Join(dir, "log", "sbbroker.log"))
	if err != nil {
		t.Fatal(err)
	}
	logged := 0
	for _, line := range strings.Split(string(brokerLog), "\n") {
		if strings.Contains(line, "duplicate dropped") && strings.Contains(line, " queue=orders message_id="+prefix[1]) {
			logged++
		}
	}
	claimed := -1
	if strings.Contains(out, "run 2: none of its messages dropped on the queue") {
		claimed = 0
	} else if m := regexp.MustCompile(`run 2: (\d+) of its messages dropped`).FindStringSubmatch(out); m != nil {
		claimed, _ = strconv.Atoi(m[1])
	}
	if claimed != logged {
		t.Errorf("the demo says %d of run 2's messages were dropped, the broker logged %d:\n%s", claimed, logged, out)
	}
	dups, _ := strconv.Atoi(resends[1][1])
	reused, _ := strconv.Atoi(resends[1][2])
	d, _ := summary["duplicate"].(float64)
	mm, _ := summary["mismatch"].(float64)
	caught := d + mm
	if claimed == 0 && caught < float64(dups+reused) {
		t.Errorf("the demo says run 2's %d resends all reached the worker, which caught %v duplicates and mismatches:\n%s", dups+reused, caught, out)
	}

	created, _ := summary["created"].(float64)
	for _, s := range subscribers {
		// cosmium does not fence an inbox marker's write (it ignores
		// If-Match), so a subscriber may count an event as created twice.
		sc, _ := summaries[s]["created"].(float64)
		sd, _ := summaries[s]["duplicate"].(float64)
		if sc == 0 || sc+sd < created {
			t.Errorf("%s handled %v events (%v created, %v duplicates), want one per order the worker created (%v): outbox → topic → inbox does not run\n%s", s, sc+sd, sc, sd, created, out)
		}
	}

	if out, err := sh("down"); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	for s, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s (pid %d) still exists after down: %v", s, pid, err)
		}
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}
