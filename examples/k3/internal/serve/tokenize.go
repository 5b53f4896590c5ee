package serve

import (
	"errors"
	"net/http"
	"unicode/utf8"

	"github.com/k3-project/k3/tokenizer"
)

// tokenizeRequest is llama-server's POST /tokenize body.
type tokenizeRequest struct {
	Content *string `json:"content"`
	// AddSpecial asks for BOS/EOS around the text; the Kimi tokenizer adds nothing, so only
	// false is accepted.
	AddSpecial bool `json:"add_special"`
	// ParseSpecial (default true, as for a completion's prompt) turns special names into their
	// ids; false encodes them as plain text.
	ParseSpecial *bool `json:"parse_special"`
	WithPieces   bool  `json:"with_pieces"`
}

// piece is one token with its text: a string when its bytes are valid UTF-8, otherwise the
// bytes as numbers (llama-server's convention).
type piece struct {
	ID    int `json:"id"`
	Piece any `json:"piece"`
}

// tokenize is POST /tokenize.
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) *apiError {
	var q tokenizeRequest
	if e := readJSON(w, r, s.lim.MaxBodyBytes, s.lim.BodyTimeout, &q); e != nil {
		return e
	}
	switch {
	case q.Content == nil:
		return badParam("content", "content is required")
	case q.AddSpecial:
		return badParam("add_special", "the Kimi tokenizer adds no special tokens; add_special must be false")
	}
	mode := tokenizer.AllowSpecial
	if q.ParseSpecial != nil && !*q.ParseSpecial {
		mode = tokenizer.NoSpecial
	}
	ids, e := s.encode("content", *q.Content, mode)
	if e != nil {
		return e
	}
	if !q.WithPieces {
		writeJSON(w, http.StatusOK, map[string][]int{"tokens": append([]int{}, ids...)})
		return nil
	}
	out := make([]piece, len(ids))
	for i, id := range ids {
		b, err := s.o.Tokens.TokenBytes(id)
		if err != nil {
			// The tokenizer just produced id: failing to decode it is the server's fault.
			return &apiError{status: http.StatusInternalServerError, typ: "server_error", msg: err.Error()}
		}
		out[i].ID, out[i].Piece = id, string(b)
		if !utf8.Valid(b) {
			nums := make([]int, len(b))
			for k, c := range b {
				nums[k] = int(c)
			}
			out[i].Piece = nums
		}
	}
	writeJSON(w, http.StatusOK, map[string][]piece{"tokens": out})
	return nil
}

// detokenizeRequest is llama-server's POST /detokenize body.
type detokenizeRequest struct {
	Tokens *[]int `json:"tokens"`
}

// detokenize is POST /detokenize: invalid UTF-8 in the decoded bytes becomes U+FFFD.
func (s *Server) detokenize(w http.ResponseWriter, r *http.Request) *apiError {
	var q detokenizeRequest
	if e := readJSON(w, r, s.lim.MaxBodyBytes, s.lim.BodyTimeout, &q); e != nil {
		return e
	}
	if q.Tokens == nil {
		return badParam("tokens", "tokens is required")
	}
	text, err := s.o.Tokens.Decode(*q.Tokens)
	if err != nil {
		if _, ok := errors.AsType[*tokenizer.UnknownIDError](err); ok {
			return badParam("tokens", "%v", err)
		}
		return &apiError{status: http.StatusInternalServerError, typ: "server_error", msg: err.Error()}
	}
	writeJSON(w, http.StatusOK, map[string]string{"content": text})
	return nil
}
