;; set! of a primitive is refused: primitives are not variables.
;; error: E005 4:8
(begin
 (set! exp 1.0)
 1.0)
