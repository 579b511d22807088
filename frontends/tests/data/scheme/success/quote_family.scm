;; The four prefix abbreviations, nested and mixed.
'x
'(a b c)
`(a ,b ,@c)
''x
'()
`(1 ,(+ 1 1) ,@(list 3 4))
',@,x
'[1 2]
