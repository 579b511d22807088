;; Delimiters end tokens without whitespace.
(a(b)c)
'a'b
(f[1 2]g)
x,y
(1)(2)
a`b
