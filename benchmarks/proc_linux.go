package main

import "syscall"

// childAttr makes the kernel kill a node when the benchmark exits, however
// it exits.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
