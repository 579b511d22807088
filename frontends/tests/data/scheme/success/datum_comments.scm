;; #; skips exactly one datum, of any shape.
#;(ignored form)
(a #;b c)
(a #;(b (c)) d)
#;#;x y
z
'#;skipped kept
(a . #;b c)
[1 #;2 3]
