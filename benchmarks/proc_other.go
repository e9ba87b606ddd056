//go:build !linux

package main

import "syscall"

// childAttr: elsewhere a node leaves when its stdin closes.
func childAttr() *syscall.SysProcAttr { return nil }
