//go:build !linux

// Package childproc sets up child processes that must not outlive the process that started
// them (test servers, the demo's worker), however that process ends.
package childproc

import "syscall"

// Attr returns process attributes for a child process, in a process group of its own when
// ownGroup is set. Only Linux can also kill it when its parent dies; elsewhere a parent that
// is killed leaves it running until it exits on its own.
func Attr(ownGroup bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: ownGroup}
}
