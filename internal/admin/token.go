package admin

import "fmt"

// ValidToken reports whether tok may be a bearer token: the characters of
// RFC 6750's b64token, so that it travels in a header unchanged. The
// error never repeats the token.
func ValidToken(tok string) error {
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' || c == '=':
		default:
			return fmt.Errorf("byte %d is not allowed in a bearer token (letters, digits and -._~+/=)", i)
		}
	}
	return nil
}
