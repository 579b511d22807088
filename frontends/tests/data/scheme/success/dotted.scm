;; Dotted pairs; a dotted list whose tail is a list is that list.
(a . b)
(a b . c)
(1 . 2)
(a . (b . (c . ())))
((a . b) . (c . d))
(a . #t)
(lambda args . body)
