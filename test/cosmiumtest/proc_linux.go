package cosmiumtest

import (
	"os/exec"
	"syscall"
)

// setProcAttr asks the kernel to kill the server when the thread that started
// it exits, which for a Go program in practice means when the test process
// dies without running its cleanups (a test timeout, a panic, SIGKILL), so
// that no emulator outlives its test.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
