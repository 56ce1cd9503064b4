//go:build !linux

package cosmiumtest

import "os/exec"

// setProcAttr does nothing on this platform: a server whose test process dies
// without running its cleanups keeps running until killed.
func setProcAttr(cmd *exec.Cmd) {}
