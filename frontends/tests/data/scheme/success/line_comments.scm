; a comment at the start
(a ; trailing comment
 b) ;; another
;;; three semicolons
c;comment right after an atom
