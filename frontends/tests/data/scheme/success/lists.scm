;; Proper lists, nested lists and the empty list.
(a b c)
(a (b (c (d))) e)
()
(())
(f () (g ()))
