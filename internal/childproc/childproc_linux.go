// Package childproc sets up child processes that must not outlive the process that started
// them (test servers, the demo's worker), however that process ends.
package childproc

import "syscall"

// Attr returns process attributes that kill the child when its parent dies (Linux's
// PR_SET_PDEATHSIG), in a process group of its own when ownGroup is set.
func Attr(ownGroup bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: ownGroup, Pdeathsig: syscall.SIGKILL}
}
