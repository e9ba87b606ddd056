//go:build !linux

package transport

import "net"

func setNotSentLowat(net.Conn, int) error { return nil }
