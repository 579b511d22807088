	(a	b)   ;; tabs and spaces

   (c

    d)
