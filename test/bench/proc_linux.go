package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// SelfCPU returns the CPU time, user and system, that this process has used
// so far, every thread and the garbage collector included, from getrusage.
func SelfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("bench: getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// clockTick is the unit of the CPU times in /proc/PID/stat: USER_HZ, which
// is 100 on every Linux architecture Go supports.
const clockTick = 10 * time.Millisecond

// ProcessCPU returns the CPU time, user and system, that process pid has used
// so far, from /proc/PID/stat (fields utime and stime), to the kernel's
// 10 ms clock tick: measure over enough messages that a tick does not matter.
func ProcessCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	// The command name, field 2, is in parentheses and may contain spaces:
	// count the fields after its closing parenthesis. utime and stime are
	// fields 14 and 15, the 12th and 13th after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: /proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("bench: /proc/%d/stat: %d fields after the command name, want at least 13", pid, len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: /proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// PeakRSS returns the peak resident set size of process pid (0: this
// process) in bytes: VmHWM of /proc/PID/status, since the process started
// or since the last ResetPeakRSS.
func PeakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(procPath(pid, "status"))
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		v, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(v) // "12345 kB"
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("bench: VmHWM %q is not in kB", v)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: VmHWM: %w", err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("bench: %s has no VmHWM", procPath(pid, "status"))
}

// ResetPeakRSS resets the peak resident set size of process pid (0: this
// process) to its current resident set size, by writing 5 to
// /proc/PID/clear_refs (Linux 4.0 and later), so that PeakRSS then reports
// the peak of what follows.
func ResetPeakRSS(pid int) error {
	if err := os.WriteFile(procPath(pid, "clear_refs"), []byte("5"), 0); err != nil {
		return fmt.Errorf("bench: reset the peak RSS: %w", err)
	}
	return nil
}

func procPath(pid int, name string) string {
	if pid == 0 {
		return "/proc/self/" + name
	}
	return fmt.Sprintf("/proc/%d/%s", pid, name)
}
