package tokenizer

import "encoding/base64"

var b64val = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	const alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := 0; i < len(alpha); i++ {
		t[alpha[i]] = int8(i)
	}
	return t
}()

// appendBase64 decodes canonical, padded standard base64 and appends the
// bytes to dst. Unlike encoding/base64 it refuses embedded CR/LF and
// non-zero padding bits, so each token has exactly one spelling. It returns
// a non-empty message on refusal.
func appendBase64(dst, src []byte) ([]byte, string) {
	if len(src) == 0 {
		return dst, "empty token"
	}
	if len(src)%4 != 0 {
		return dst, "base64 length is not a multiple of 4"
	}
	pad := 0
	if src[len(src)-1] == '=' {
		pad = 1
		if src[len(src)-2] == '=' {
			pad = 2
		}
	}
	body := src[:len(src)-pad]
	for i := 0; i+4 <= len(body); i += 4 {
		a, b, c, d := b64val[body[i]], b64val[body[i+1]], b64val[body[i+2]], b64val[body[i+3]]
		if a|b|c|d < 0 {
			return dst, "invalid base64 character"
		}
		v := uint32(a)<<18 | uint32(b)<<12 | uint32(c)<<6 | uint32(d)
		dst = append(dst, byte(v>>16), byte(v>>8), byte(v))
	}
	tail := body[len(body)/4*4:]
	switch len(tail) {
	case 0:
	case 2:
		a, b := b64val[tail[0]], b64val[tail[1]]
		if a|b < 0 {
			return dst, "invalid base64 character"
		}
		if b&0x0f != 0 {
			return dst, "non-canonical base64 (padding bits set)"
		}
		dst = append(dst, byte(uint32(a)<<2|uint32(b)>>4))
	case 3:
		a, b, c := b64val[tail[0]], b64val[tail[1]], b64val[tail[2]]
		if a|b|c < 0 {
			return dst, "invalid base64 character"
		}
		if c&0x03 != 0 {
			return dst, "non-canonical base64 (padding bits set)"
		}
		v := uint32(a)<<10 | uint32(b)<<4 | uint32(c)>>2
		dst = append(dst, byte(v>>8), byte(v))
	default:
		return dst, "invalid base64 padding"
	}
	return dst, ""
}

func encodeBase64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
