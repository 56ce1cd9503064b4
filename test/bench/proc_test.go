package bench_test

import (
	"crypto/sha256"
	"os"
	"os/exec"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/test/bench"
)

// TestSelfCPUAndProcessCPUCountWork: CPU spent hashing shows in SelfCPU,
// and /proc/self/stat agrees with getrusage to within two clock ticks.
func TestSelfCPUAndProcessCPUCountWork(t *testing.T) {
	before, err := bench.SelfCPU()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<20)
	for range 4 {
		sum := sha256.Sum256(buf)
		buf[0] = sum[0]
	}
	after, err := bench.SelfCPU()
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Fatalf("SelfCPU went from %v to %v while hashing 256 MiB, want an increase", before, after)
	}
	proc, err := bench.ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	self, _ := bench.SelfCPU()
	// /proc/PID/stat is read between two getrusage calls and counts in
	// 10 ms ticks.
	if proc > self+20e6 || proc < after-20e6 {
		t.Errorf("ProcessCPU = %v, getrusage %v .. %v: want them to agree to two ticks", proc, after, self)
	}
}

func TestProcessCPUOfAMissingProcessFails(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	// The child has been reaped: its /proc entry is gone.
	if _, err := bench.ProcessCPU(cmd.Process.Pid); err == nil {
		t.Errorf("ProcessCPU of exited process %d succeeded", cmd.Process.Pid)
	}
}

// TestPeakRSS: after ResetPeakRSS, touching 64 MiB raises the peak resident
// set by about that much.
func TestPeakRSS(t *testing.T) {
	if err := bench.ResetPeakRSS(0); err != nil {
		t.Fatal(err)
	}
	base, err := bench.PeakRSS(0)
	if err != nil {
		t.Fatal(err)
	}
	const size = 64 << 20
	buf := make([]byte, size)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	peak, err := bench.PeakRSS(0)
	if err != nil {
		t.Fatal(err)
	}
	if peak < base+size*9/10 {
		t.Errorf("PeakRSS = %d after touching %d bytes from %d, want at least %d", peak, size, base, base+size*9/10)
	}
	keep(buf)
}

var sink []byte

func keep(b []byte) { sink = b }
