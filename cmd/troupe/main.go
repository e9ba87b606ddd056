// Command troupe is an operator's CLI over the management API of a
// Troupe process: the read-only JSON its admin listener serves under
// /api/v1 when system.AdminConfig.API is on.
//
// Usage:
//
//	troupe [flags] status
//	troupe [flags] members [--status alive,suspect] [--type T]
//	troupe [flags] records
//	troupe [flags] placement
//	troupe [flags] where TYPE KEY
//	troupe [flags] types
//
// Flags may come before or after the command:
//
//	--addr      the admin listener: host:port, or a URL (http:// or https://);
//	            default 127.0.0.1:7401 (system.DefaultAdminBind)
//	--token     the bearer token (default $TROUPE_ADMIN_TOKEN); never printed
//	--tls-ca    a PEM file of the CAs that sign the listener's certificate
//	            (any TLS flag makes a bare host:port https)
//	--tls-cert, --tls-key
//	            a client certificate and its key, PEM, for mutual TLS
//	--json      print the API's JSON as it came (members prints one
//	            document per page of 1000)
//	--timeout   the time the whole command may take (default 10s)
//
// Tables are aligned for a terminal. Exit status: 0 done, 1 the request
// failed (unreachable, refused, 401, 503, ...), 2 bad usage.
package main

import (
	"os"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }
